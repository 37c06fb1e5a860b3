# Report: https://github.com/pytorch/pytorch/issues/47175
# Modelled on pytorch/pytorch#47175 (a nasty bug: "calling [zero_grad] at the beginning of each
# epoch instead of the beginning of each iteration"): a function trains one epoch of a small
# 1-D CNN and zeroes the gradients once, before its batch loop, so every step adds the new
# gradients onto all the earlier ones of the epoch. The finding is at that zero_grad (the line
# to move). The fixed twin zeroes inside the batch loop.
import torch
import torch.nn.functional as F
from torch import nn


def make_model() -> nn.Module:
    return nn.Sequential(nn.Conv1d(1, 8, 5, padding=2), nn.ReLU(), nn.AdaptiveAvgPool1d(1),
                         nn.Flatten(), nn.Linear(8, 2))


def train_epoch(model, optimizer, signals, labels, batch: int = 16) -> float:
    model.train()
    for i in range(0, len(signals), batch):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(signals[i:i + batch]), labels[i:i + batch])
        loss.backward()
        optimizer.step()
    return loss.item()


torch.manual_seed(0)
signals = torch.randn(96, 1, 32)
labels = (signals.mean(dim=(1, 2)) > 0).long()
model = make_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for epoch in range(3):
    loss = train_epoch(model, optimizer, signals, labels)
print(f"loss {loss:.3f}")
