# Modelled on GitHub AminRezaei0x443/memory-efficient-attention#6
# (https://github.com/AminRezaei0x443/memory-efficient-attention/pull/6, "it needs device argument
# for GPU"): the static helper that computes the relative-position bias makes its positions on
# the device it is given, the scores' device. The "meta" device stands in for "cuda".
import torch
from torch import nn

device = torch.device("meta")
torch.manual_seed(5)


class RelativeAttention(nn.Module):
    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.slope = nn.Parameter(torch.tensor(0.1))

    @staticmethod
    def distances(n: int, device: torch.device) -> torch.Tensor:
        pos = torch.arange(n, device=device)
        return (pos[None, :] - pos[:, None]).abs().float()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
        scores = scores - self.slope * self.distances(x.shape[1], x.device)
        return scores.softmax(-1) @ v


model = RelativeAttention().to(device)
out = model(torch.randn(2, 7, 16, device=device))
out.sum().backward()
