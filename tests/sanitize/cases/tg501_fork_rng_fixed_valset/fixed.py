# A fixed validation set drawn inside torch.random.fork_rng (https://pytorch.org/docs/stable/random.html#torch.random.fork_rng):
# the seed inside the block fixes only those draws and torch's state is restored when the block
# ends, so the run itself stays deliberately unseeded; it never asks to be reproducible, and
# TG501/TG502 stay silent although training draws from numpy's unseeded global generator.
import numpy as np
import torch
from torch import nn

with torch.random.fork_rng():
    torch.manual_seed(1234)
    x_val = torch.randn(50, 4)
    y_val = (x_val.sum(1) > 0).long()
model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(8):
    x = torch.randn(32, 4)
    x = x + torch.from_numpy(np.random.normal(0, 0.05, x.shape).astype("float32"))
    y = (x.sum(1) > 0).long()
    optimizer.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
model.eval()
with torch.no_grad():
    accuracy = (model(x_val).argmax(1) == y_val).float().mean().item()
