# Modelled on GitHub lucidrains/rotary-embedding-torch#18
# (https://github.com/lucidrains/rotary-embedding-torch/issues/18): a module caches a table
# computed from a learnable parameter, so the cached tensor keeps the first step's graph and the
# second backward dies with "Trying to backward through the graph a second time". Here: sine
# time features with learnable frequencies for a small forecaster.
import torch
import torch.nn.functional as F
from torch import nn


class LearnedTimeFeatures(nn.Module):
    def __init__(self, size: int) -> None:
        super().__init__()
        self.omega = nn.Parameter(torch.linspace(0.1, 1.0, size))
        self._table = None

    def forward(self, length: int) -> torch.Tensor:
        if self._table is None or self._table.shape[0] < length:
            t = torch.arange(length, dtype=torch.float32)
            self._table = torch.sin(t[:, None] * self.omega)  # expect: TG202
        return self._table[:length]


class Forecaster(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.time = LearnedTimeFeatures(6)
        self.inp = nn.Linear(1, 6)
        self.out = nn.Linear(6, 1)

    def forward(self, series: torch.Tensor) -> torch.Tensor:  # (N, L, 1) -> (N, 1)
        h = torch.tanh(self.inp(series) + self.time(series.shape[1]))
        return self.out(h.mean(1))


class Trainer:
    def __init__(self) -> None:
        self.model = Forecaster()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-2)

    def step(self, series: torch.Tensor, target: torch.Tensor) -> float:
        loss = F.mse_loss(self.model(series), target)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


torch.manual_seed(14)
trainer = Trainer()
for _ in range(3):
    x = torch.randn(8, 10, 1)
    trainer.step(x, x[:, -1])
