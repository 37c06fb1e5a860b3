# Modelled on Jinfu-pku/GMNet#3 (https://github.com/Jinfu-pku/GMNet/issues/3): an RGB-thermal
# fusion module multiplies the RGB features by a gate (the multiplication saves them for
# backward), then applies its nn.ReLU(inplace=True) to those same features; backward fails with
# "modified by an inplace operation ... output 0 of Relu". The in-place ReLU call is the line.
import torch
from torch import nn
import torch.nn.functional as F


class Fusion(nn.Module):
    def __init__(self, ch: int = 8) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, ch, 3, padding=1), nn.ReLU(inplace=True))
        self.gate = nn.Conv2d(2 * ch, 2, 1)
        self.relu = nn.ReLU(inplace=True)
        self.head = nn.Conv2d(ch, 3, 1)

    def forward(self, rgb_img: torch.Tensor, th_img: torch.Tensor) -> torch.Tensor:
        rgb, th = self.stem(rgb_img), self.stem(th_img)
        w = torch.sigmoid(self.gate(torch.cat([rgb, th], 1)))
        fused = rgb * w[:, :1] + th * w[:, 1:]
        rgb = F.relu(rgb)
        return self.head(fused + rgb)


torch.manual_seed(0)
model = Fusion()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
rgb, th, label = torch.randn(2, 3, 8, 8), torch.randn(2, 3, 8, 8), torch.randint(0, 3, (2, 8, 8))
loss = F.cross_entropy(model(rgb, th), label)
opt.zero_grad()
loss.backward()
opt.step()
