"""``sys.exit()`` inside the training loop: a script that stops at a step budget with its own exit
status (4), after saving its weights."""

import sys

import torch
from torch import nn

from _weights import save

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for step in range(10_000):
    x, y = torch.randn(16, 8), torch.randint(0, 3, (16,))
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    if step == 299:
        save(model)
        sys.exit(4)
