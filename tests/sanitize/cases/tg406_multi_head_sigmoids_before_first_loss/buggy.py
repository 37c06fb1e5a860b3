# Report: https://github.com/MIC-DKFZ/nnUNet/issues/16
# Modelled on GitHub MIC-DKFZ/nnUNet#16 (deep supervision; "BCE has sigmoid included so you
# should not apply it before this loss"): a 1-D signal tagger emits one map per scale, each
# squashed by torch.sigmoid in forward, and every map is scored with
# binary_cross_entropy_with_logits in a comprehension after the whole forward ran. The loss
# squashes again; every map stays within (0.5, 0.73).
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
        return [torch.sigmoid(head(h)) for head in self.heads]  # expect: TG406


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
