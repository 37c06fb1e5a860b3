# Modelled on GitHub aimagelab/meshed-memory-transformer#71
# (https://github.com/aimagelab/meshed-memory-transformer/issues/71, "Call scheduler.step() per
# epoch AND per batch?"): the epoch function steps a per-epoch StepLR after every batch, and the
# epoch loop steps it once more after the epoch, so the rate is halved every two batches instead of
# every two epochs. Here, a small regression trainer with hand-sliced batches.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(2)


class Trainer:
    def __init__(self) -> None:
        self.model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05)
        self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=2, gamma=0.5)
        self.x, self.y = torch.randn(96, 6), torch.randn(96, 1)

    def train_epoch(self) -> float:
        self.model.train()
        total = 0.0
        for start in range(0, 96, 16):
            loss = F.mse_loss(self.model(self.x[start:start + 16]), self.y[start:start + 16])
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.scheduler.step()  # expect: TG305
            total += loss.item()
        return total

    def fit(self, epochs: int = 4) -> None:
        for _ in range(epochs):
            self.train_epoch()
            self.scheduler.step()


Trainer().fit()
