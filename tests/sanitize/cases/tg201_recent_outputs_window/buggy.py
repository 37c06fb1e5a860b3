# Modelled on pytorch/tutorials#842 (https://github.com/pytorch/tutorials/pull/842): "a deque ...
# has a built-in maxlen keyword argument, that pretty much does the entire cyclic-buffer thing".
# A trainer keeps its recent value predictions for a diagnostic plot in a deque built without a
# maxlen: the deque grows every step and holds every step's autograd graph.
from collections import deque

import torch
import torch.nn.functional as F
from torch import nn


class ValueTrainer:
    def __init__(self) -> None:
        self.net = nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 1))
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.05)
        self.recent_values = deque()

    def step(self, states, returns):
        values = self.net(states).squeeze(-1)
        self.recent_values.append(values)  # expect: TG201
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
