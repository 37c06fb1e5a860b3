# Report: https://github.com/pytorch/pytorch/issues/15428
# Modelled on pytorch/pytorch#15428 ("one of the variables needed for gradient computation has
# been modified by an inplace operation"). A residual block computes its shortcut from `x` first,
# then its residual branch, a Sequential whose first layer is ReLU(inplace=True): that ReLU
# overwrites `x`, which the shortcut's convolution saved for backward. The stem builds another
# in-place ReLU, so the construction alone does not say which one changed the saved tensor.
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))
        self.residual = nn.Sequential(
            nn.ReLU(inplace=True),  # expect: TG207
            nn.Conv2d(cin, cout, 3, stride, 1, bias=False),
            nn.BatchNorm2d(cout),
        )

    def forward(self, x):
        sc = self.shortcut(x)
        resd = self.residual(x)
        return resd + sc


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8),
                                  nn.ReLU(inplace=True))
        self.blocks = nn.Sequential(Block(8, 16, 2), Block(16, 32, 2))
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


torch.manual_seed(0)
net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))
    loss = nn.functional.cross_entropy(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("loss", loss.item())
