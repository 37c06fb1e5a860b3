# Report: https://github.com/MIC-DKFZ/nnUNet/issues/16
# Fixed twin: the heads return raw scores and the with-logits loss applies the sigmoid once.
import torch
import torch.nn.functional as F
from torch import nn


class MultiScaleTagger(nn.Module):
    def __init__(self, width: int = 12) -> None:
        super().__init__()
        self.stem = nn.Conv1d(2, width, 5, padding=2)
        self.heads = nn.ModuleList(nn.Conv1d(width, 1, k, padding=k // 2) for k in (1, 3, 5))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        h = torch.relu(self.stem(x))
        return [head(h) for head in self.heads]


def scale_losses(maps: list[torch.Tensor], target: torch.Tensor) -> list[torch.Tensor]:
    return [F.binary_cross_entropy_with_logits(m, target) for m in maps]


torch.manual_seed(4)
net = MultiScaleTagger()
opt = torch.optim.SGD(net.parameters(), lr=0.05)
signal = torch.randn(16, 2, 40)
events = (signal[:, :1] > 0.8).float()
for step in range(6):
    losses = scale_losses(net(signal), events)
    opt.zero_grad()
    sum(losses).backward()
    opt.step()
