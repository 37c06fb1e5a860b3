# Report: https://github.com/microsoft/nni/pull/4614
# Modelled on microsoft/nni#4614 (a classifier head built as nn.Dropout(p=dropout, inplace=True)
# right after a ReLU fails with "one of the variables needed for gradient computation has been
# modified by an inplace operation"). The training step clips gradients in place after the
# backward; that clip_grad_norm_ has not run when the first backward fails, so it is not what
# changed the saved ReLU output: the in-place dropout built in the head is.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class Head(nn.Module):
    def __init__(self, features: int, classes: int, dropout: float = 0.2) -> None:
        super().__init__()
        self.hidden = nn.Linear(features, 64)
        self.classifier = nn.Sequential(nn.ReLU(),
                                        nn.Dropout(p=dropout, inplace=False),
                                        nn.Linear(64, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.hidden(x))


def train(model: nn.Module, steps: int = 3) -> float:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model.train()
    for _ in range(steps):
        x, y = torch.randn(16, 20), torch.randint(0, 5, (16,))
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return loss.item()


print(f"loss {train(Head(20, 5)):.3f}")
