# Modelled on GitHub visionml/pytracking#313 (https://github.com/visionml/pytracking/issues/313):
# training statistics kept per phase hold the loss tensors themselves, so every step's graph stays
# alive and memory grows. Here a callback-style registry keeps per-phase, per-name lists of values
# (a dict of objects holding a dict of lists, five levels below the trainer).
import torch
import torch.nn.functional as F
from torch import nn


class PhaseStats:
    def __init__(self) -> None:
        self.series = {}

    def record(self, name: str, value) -> None:
        self.series.setdefault(name, []).append(value.item())


class StatsCallback:
    def __init__(self) -> None:
        self.phases = {"train": PhaseStats(), "valid": PhaseStats()}

    def on_batch_end(self, phase: str, loss: torch.Tensor) -> None:
        self.phases[phase].record("loss", loss)


class Trainer:
    def __init__(self, callbacks: list) -> None:
        self.model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 1))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05)
        self.callbacks = callbacks

    def fit(self, steps: int) -> None:
        for _ in range(steps):
            x = torch.randn(16, 5)
            loss = F.mse_loss(self.model(x), x.sum(1, keepdim=True))
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            for callback in self.callbacks:
                callback.on_batch_end("train", loss)


torch.manual_seed(15)
Trainer([StatsCallback()]).fit(12)
