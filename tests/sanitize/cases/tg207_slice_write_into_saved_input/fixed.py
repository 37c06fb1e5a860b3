# Fixed twin of buggy.py (PyTorch forum,
# https://discuss.pytorch.org/t/when-inplace-operation-are-allowed-and-when-not/169583): the
# first feature is zeroed out of place (`masked_fill` makes a new tensor), so the features the
# scoring layer saved for backward stay as they were. Near-miss that must stay silent: the
# trainer adds each loss to a running total in place, a tensor no backward saved.
import torch
from torch import nn

torch.manual_seed(0)


class GatedTabular(nn.Module):
    def __init__(self, features: int = 12, dim: int = 8) -> None:
        super().__init__()
        self.proj = nn.Linear(features, dim)
        self.score = nn.Linear(dim, 1)
        self.head = nn.Linear(dim, 2)

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        hidden = self.proj(rows)                     # (N, D)
        gate = torch.sigmoid(self.score(hidden))     # (N, 1)
        pad = torch.zeros_like(hidden, dtype=torch.bool)
        pad[:, 0] = True
        hidden = hidden.masked_fill(pad, 0.0)
        return self.head(gate * hidden)


class Trainer:
    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.running = torch.zeros(())

    def fit_batch(self, rows: torch.Tensor, labels: torch.Tensor) -> None:
        loss = nn.functional.cross_entropy(self.model(rows), labels)
        self.running.add_(loss.detach())
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()


trainer = Trainer(GatedTabular())
for step in range(3):
    trainer.fit_batch(torch.randn(16, 12), torch.randint(0, 2, (16,)))
