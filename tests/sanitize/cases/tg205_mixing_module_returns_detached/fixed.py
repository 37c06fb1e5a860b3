# Modelled on GitHub queenie88/A-GCN#4 (https://github.com/queenie88/A-GCN/issues/4): a module that
# predicts a mixing matrix from its own weights returns it detached, so those weights never get a
# gradient although the optimizer holds them. Here: the token-mixing weights of a small sequence
# classifier, trained by a class-based trainer.
import torch
import torch.nn.functional as F
from torch import nn


class MixingWeights(nn.Module):
    def __init__(self, length: int, dim: int) -> None:
        super().__init__()
        self.query = nn.Linear(dim, 8, bias=False)
        self.key = nn.Linear(dim, 8, bias=False)
        self.positions = nn.Parameter(torch.randn(length, dim) * 0.1)

    def forward(self) -> torch.Tensor:
        scores = self.query(self.positions) @ self.key(self.positions).T
        mix = torch.softmax(scores, dim=-1)
        return mix


class Mixer(nn.Module):
    def __init__(self, length: int = 6, dim: int = 10, classes: int = 3) -> None:
        super().__init__()
        self.mixing = MixingWeights(length, dim)
        self.embed = nn.Linear(4, dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (N, L, 4)
        h = self.embed(x)
        h = self.mixing() @ h
        return self.head(h.mean(1))


class Trainer:
    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

    def fit(self, steps: int) -> None:
        for _ in range(steps):
            x, y = torch.randn(16, 6, 4), torch.randint(0, 3, (16,))
            loss = F.cross_entropy(self.model(x), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()


torch.manual_seed(3)
Trainer(Mixer()).fit(8)
