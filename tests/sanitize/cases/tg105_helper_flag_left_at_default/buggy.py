# Modelled on GitHub NVIDIA/apex#1449 ("fix: apply dropout only in training mode",
# https://github.com/NVIDIA/apex/pull/1449) and pytorch/pytorch#26338: the dropout sits in a
# helper whose training flag defaults to True, and the module's forward never passes its own
# mode down, so the helper keeps dropping after model.eval().
import torch
import torch.nn.functional as F
from torch import nn


def feed_forward(h, inner, outer, p, training=True):
    h = F.dropout(F.gelu(inner(h)), p, training)
    return outer(h)


class Block(nn.Module):
    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.score = nn.Linear(dim, 1)
        self.inner, self.outer = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def _pool(self, x, p, train=True):
        weights = torch.softmax(self.score(x).squeeze(-1), dim=1)
        weights = F.dropout(weights, p=p, training=train)
        return (weights.unsqueeze(-1) * x).sum(dim=1)

    def forward(self, x):
        x = x + feed_forward(x, self.inner, self.outer, 0.1)  # expect: TG105
        return self._pool(x, 0.2)  # expect: TG105


torch.manual_seed(3)
model = Block()
model.eval()
with torch.no_grad():
    first, second = model(torch.ones(2, 5, 8)), model(torch.ones(2, 5, 8))
print(torch.equal(first, second))
