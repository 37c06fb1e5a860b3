# Modelled on GitHub pytorch/pytorch#26338 ("Behavior of F.dropout in eval mode",
# https://github.com/pytorch/pytorch/issues/26338) and rixwew/pytorch-fm#21: F.dropout in forward
# without training=self.training keeps dropping after model.eval().
import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.score = nn.Linear(dim, 1)

    def forward(self, x):
        weights = torch.softmax(self.score(x).squeeze(-1), dim=1)
        weights = F.dropout(weights, p=0.2)  # expect: TG105
        return (weights.unsqueeze(-1) * x).sum(dim=1)


torch.manual_seed(13)
model = Attention()
model.eval()
with torch.no_grad():
    first, second = model(torch.ones(2, 5, 8)), model(torch.ones(2, 5, 8))
print(torch.equal(first, second))
