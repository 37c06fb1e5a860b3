# Fixed twin of buggy.py (pytorch/tutorials#842, https://github.com/pytorch/tutorials/pull/842):
# the deque of recent value predictions has a maxlen, so it drops its oldest entry at each
# append and holds the graphs of its last 6 steps only: memory stops growing once it is full.
from collections import deque

import torch
import torch.nn.functional as F
from torch import nn


class ValueTrainer:
    def __init__(self) -> None:
        self.net = nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 1))
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.05)
        self.recent_values = deque(maxlen=6)

    def step(self, states, returns):
        values = self.net(states).squeeze(-1)
        self.recent_values.append(values)
        loss = F.mse_loss(values, returns)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()


torch.manual_seed(0)
trainer = ValueTrainer()
for step in range(24):
    states = torch.randn(16, 6)
    trainer.step(states, states.sum(1))
print(len(trainer.recent_values))
