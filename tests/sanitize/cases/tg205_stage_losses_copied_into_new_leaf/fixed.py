# Modelled on MC-E/Deep-Generalized-Unfolding-Networks-for-Image-Restoration#6
# (https://github.com/MC-E/Deep-Generalized-Unfolding-Networks-for-Image-Restoration/issues/6):
# a multi-stage restoration network sums one loss per stage output, but gathers them with
# torch.tensor([...], requires_grad=True), a new leaf holding only the numbers: backward runs
# without error and no parameter ever gets a gradient. torch.stack keeps the graph.
import torch
from torch import nn
import torch.nn.functional as F


class Stages(nn.Module):
    def __init__(self, n: int = 3) -> None:
        super().__init__()
        self.stages = nn.ModuleList(nn.Conv2d(3, 3, 3, padding=1) for _ in range(n))

    def forward(self, x: torch.Tensor) -> list:
        outs = []
        for stage in self.stages:
            x = x + stage(x)
            outs.append(x)
        return outs


torch.manual_seed(0)
model = Stages()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for it in range(12):
    noisy = torch.rand(2, 3, 8, 8)
    clean = noisy.clamp(0.2, 0.8)
    restored = model(noisy)
    loss = torch.stack([F.l1_loss(r, clean) for r in restored]).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
