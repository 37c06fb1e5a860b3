"""Autograd graphs of about 10^5 nodes, kept alive: a differentiable simulation (a learned
velocity field integrated over 25,000 Euler steps, 4 nodes each) trained by backpropagation
through the whole rollout, each rollout's loss kept for a plot (autograd mechanics:
https://pytorch.org/docs/stable/notes/autograd.html)."""

import torch
from torch import nn

from _weights import save

torch.manual_seed(0)


class Field(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(2, 2) * 0.1)

    def rollout(self, x: torch.Tensor, steps: int, dt: float) -> torch.Tensor:
        for _ in range(steps):
            x = x + dt * torch.tanh(x @ self.w)  # 4 autograd nodes per step
        return x


field = Field()
optimizer = torch.optim.SGD(field.parameters(), lr=0.01)
losses = []
for step in range(4):
    optimizer.zero_grad()
    end = field.rollout(torch.ones(1, 2), 25_000, 1e-4)
    loss = (end - torch.tensor([[0.5, 1.5]])).pow(2).sum()
    loss.backward(retain_graph=True)  # the graph is kept for a second look below
    optimizer.step()
    losses.append(loss)  # every rollout's graph stays alive
print([round(float(l), 5) for l in losses])
save(field)
