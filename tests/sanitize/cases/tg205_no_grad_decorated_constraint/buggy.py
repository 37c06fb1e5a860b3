# Modelled on GitHub denfed/leaf-audio-pytorch#3
# (https://github.com/denfed/leaf-audio-pytorch/issues/3): a learnable filterbank's frequencies
# are kept in range by a constraint module whose forward is decorated with @torch.no_grad(), so
# the clamped values carry no graph and the frequencies never learn. The fix drops the decorator
# (the clamp itself passes gradients where a value is in range).
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class RangeConstraint(nn.Module):
    def __init__(self, low, high):
        super().__init__()
        self.low, self.high = low, high

    @torch.no_grad()  # expect: TG205
    def forward(self, theta):
        return torch.clamp(theta[:], self.low, self.high)


class LearnedFilters(nn.Module):
    def __init__(self, n, width):
        super().__init__()
        self.width = width
        self.freqs = nn.Parameter(torch.linspace(0.1, 3.0, n))
        self.limit = RangeConstraint(0.0, math.pi)

    def forward(self, wav):
        freqs = self.limit(self.freqs)
        t = torch.arange(self.width, dtype=wav.dtype) - self.width // 2
        bank = torch.cos(freqs[:, None] * t).unsqueeze(1)
        return F.conv1d(wav, bank, padding=self.width // 2)


frontend = LearnedFilters(8, 15)
head = nn.Sequential(nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(8, 3))
opt = torch.optim.Adam([*frontend.parameters(), *head.parameters()], lr=1e-2)
for _ in range(5):
    wav, y = torch.randn(4, 1, 200), torch.randint(0, 3, (4,))
    loss = F.cross_entropy(head(frontend(wav)), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
