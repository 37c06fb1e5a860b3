# Fixed twin of buggy.py (https://github.com/yifita/deep_cage/issues/16): no detach, so every
# parameter learns. Near-misses that must stay silent: a frozen parameter held by the optimizer and
# a branch used only on some steps.
import torch
import torch.nn.functional as F
from torch import nn


class CageNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Linear(6, 8)
        self.weights_head = nn.Linear(8, 4)
        self.offset_head = nn.Linear(8, 4)
        self.scale = nn.Parameter(torch.ones(4), requires_grad=False)

    def forward(self, x, use_offset: bool = True):
        h = torch.relu(self.encoder(x))
        weights = torch.softmax(self.weights_head(h), dim=1)
        out = weights * self.scale
        return out + self.offset_head(h) if use_offset else out


torch.manual_seed(14)
model = CageNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(4):
    x, target = torch.randn(8, 6), torch.randn(8, 4)
    optimizer.zero_grad()
    F.mse_loss(model(x, use_offset=step == 2), target).backward()
    optimizer.step()
