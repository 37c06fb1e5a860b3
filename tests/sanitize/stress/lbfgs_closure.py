"""LBFGS with a closure (pytorch/examples' time_sequence_prediction shape): every
``optimizer.step(closure)`` evaluates the closure (zero_grad, forward, loss, backward) up to
``max_iter`` times, fewer once the loss stops changing by ``tolerance_change``, so the steps differ
in their number of evaluations (here from 2 to 20;
https://pytorch.org/docs/stable/generated/torch.optim.LBFGS.html)."""

import torch
from torch import nn

from _weights import save

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
optimizer = torch.optim.LBFGS(model.parameters(), lr=0.8, max_iter=20, tolerance_change=1e-4)
criterion = nn.MSELoss()
x = torch.randn(256, 4)
y = (x ** 2).sum(1, keepdim=True)
for step in range(60):
    batch = torch.randint(0, 256, (64,))

    def closure():
        optimizer.zero_grad()
        loss = criterion(model(x[batch]), y[batch])
        loss.backward()
        return loss

    optimizer.step(closure)
save(model)
