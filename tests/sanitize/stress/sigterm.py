"""A run ended by SIGTERM in the middle of its loop (a scheduler preempting the job): the script
saves its weights, then the signal arrives (sent to itself here, as ``kill`` or Slurm would).
``python`` dies of the signal; so does ``trainguard run``, after its report."""

import os
import signal
import time

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
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)  # the signal ends the run before this does
