# Report: https://github.com/visionml/pytracking/pull/313
# Modelled on GitHub visionml/pytracking#313 ("Fix memory leak in LTRTrainer._update_stats()"):
# the trainer keeps a dict of AverageMeter objects and updates them with the loss tensors
# themselves, so each meter's running sum chains every step's autograd graph for the whole run.
# Fixed twin: the meters get Python numbers (loss.item()).
import torch
import torch.nn.functional as F
from torch import nn


class AverageMeter:
    def __init__(self) -> None:
        self.sum, self.count = 0.0, 0

    def update(self, value, n: int = 1) -> None:
        self.sum += value * n
        self.count += n

    @property
    def avg(self) -> float:
        return float(self.sum) / max(self.count, 1)


class Trainer:
    def __init__(self) -> None:
        self.net = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 1))
        self.optimizer = torch.optim.SGD(self.net.parameters(), lr=0.05)
        self.stats: dict[str, AverageMeter] = {}

    def _update_stats(self, losses: dict, batch_size: int) -> None:
        for name, value in losses.items():
            self.stats.setdefault(name, AverageMeter()).update(value, batch_size)

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        pred = self.net(x).squeeze(1)
        mse = F.mse_loss(pred, y)
        l1 = F.l1_loss(pred, y)
        loss = mse + 0.1 * l1
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self._update_stats({"loss": loss, "mse": mse}, x.shape[0])  # expect: TG201


torch.manual_seed(9)
trainer = Trainer()
for step in range(12):
    x = torch.randn(16, 10)
    trainer.train_step(x, x[:, 0] * 2.0)
print({name: round(meter.avg, 3) for name, meter in trainer.stats.items()})
