# Report: https://github.com/ultralytics/ultralytics/pull/11217
# Modelled on the stepping condition discussed in ultralytics/ultralytics#11217 (the optimizer
# steps only when an iteration counter passes a threshold the run may never reach): a
# function-style loop with a GradScaler has `scaler.step(optimizer)` indented into the
# evaluation block, which runs every `eval_every` iterations -- more than the run has -- so the
# optimizer never steps while backward runs every batch. The finding is at the step call that
# never runs. The fixed twin steps every iteration.
import torch
import torch.nn.functional as F
from torch import nn


def evaluate(model, x, y) -> float:
    model.eval()
    with torch.no_grad():
        acc = (model(x).argmax(1) == y).float().mean().item()
    model.train()
    return acc


def train(model, optimizer, scaler, x, y, iterations: int, eval_every: int) -> float:
    for it in range(1, iterations + 1):
        idx = torch.randint(0, len(x), (16,))
        loss = F.cross_entropy(model(x[idx]), y[idx])
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        if it % eval_every == 0:
            print(f"iteration {it}: accuracy {evaluate(model, x, y):.2f}")
    return loss.item()


torch.manual_seed(0)
x, y = torch.randn(200, 6), torch.randint(0, 2, (200,))
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu", enabled=False)
print(f"loss {train(model, optimizer, scaler, x, y, iterations=40, eval_every=500):.3f}")
