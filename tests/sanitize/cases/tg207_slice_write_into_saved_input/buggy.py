# Modelled on the PyTorch forum thread "When inplace operation are allowed and when not"
# (https://discuss.pytorch.org/t/when-inplace-operation-are-allowed-and-when-not/169583): an op
# whose backward needs its input (`x ** 2` there, a Linear layer here) saves it, so changing
# that input in place afterwards makes backward fail with "modified by an inplace operation".
# Here a tabular risk model gates its hidden features with a Linear layer, then
# zeroes the first of those same features by slice assignment; the error names no op of
# the user's code, only "output 0 of torch::autograd::CopySlices".
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
        hidden[:, 0] = 0.0  # the first feature is noise  # expect: TG207
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
