# Report: https://github.com/pytorch/pytorch/issues/4534
# Modelled on pytorch/pytorch#4534 ("Expected more than 1 value per channel when training, got
# input size [1, 128]"): 1-d feature vectors in batches of 16, and a dataset size that leaves a
# last batch of one. Here the batches come from a hand-written `while` loop (no DataLoader, so
# no drop_last): 49 samples in steps of 16 leave a last batch of one sample.
import torch
from torch import nn


def batches(x, y, batch_size):
    start = 0
    while start < x.shape[0]:  # expect: TG404
        end = start + batch_size
        yield x[start:end], y[start:end]
        start += batch_size


model = nn.Sequential(nn.Linear(32, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Linear(128, 3))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
torch.manual_seed(0)
x, y = torch.randn(49, 32), torch.randint(0, 3, (49,))
for epoch in range(2):
    model.train()
    for xb, yb in batches(x, y, 16):
        loss = nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
