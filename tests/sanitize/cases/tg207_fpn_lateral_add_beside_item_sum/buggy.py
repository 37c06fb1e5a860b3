# Report: https://github.com/lyongo/NWPU-MOC/issues/4
# Modelled on lyongo/NWPU-MOC#4: an FPN's top-down pathway adds each upsampled level into the
# lateral below it in place (`laterals[i - 1] += ...`), and the laterals are ReLU outputs that
# autograd saved for backward, so the backward fails with "modified by an inplace operation". The
# training loop also keeps a running sum with `running += loss.item()`, an in-place statement on a
# Python float that has nothing to do with the error.
import torch
from torch import nn
from torch.nn import functional as F


class TinyFPN(nn.Module):
    def __init__(self, channels=(8, 16, 32), out: int = 8) -> None:
        super().__init__()
        self.lateral = nn.ModuleList(
            nn.Sequential(nn.Conv2d(c, out, 1), nn.ReLU()) for c in channels)
        self.head = nn.Conv2d(out, 1, 3, padding=1)

    def forward(self, feats):
        laterals = [conv(f) for conv, f in zip(self.lateral, feats)]
        for i in range(len(laterals) - 1, 0, -1):
            up = F.interpolate(laterals[i], size=laterals[i - 1].shape[2:])
            laterals[i - 1] += up  # expect: TG207
        return self.head(laterals[0])


torch.manual_seed(0)
model = TinyFPN()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
running = 0.0
for step in range(3):
    feats = [torch.randn(2, 8, 16, 16), torch.randn(2, 16, 8, 8), torch.randn(2, 32, 4, 4)]
    loss = model(feats).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    running += loss.item()
print("mean loss", running / 3)
