# Modelled on GitHub HuiZeng/Grid-Anchor-based-Image-Cropping-Pytorch#2
# (https://github.com/HuiZeng/Grid-Anchor-based-Image-Cropping-Pytorch/issues/2) and
# pytorch/tutorials#1624: model.train() is called once before the epochs and model.eval() inside
# the per-epoch test, so from the second epoch on the network trains in eval mode.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(10)
x, y = torch.randn(40, 5), torch.randint(0, 2, (40,))
net = nn.Sequential(nn.Linear(5, 12), nn.BatchNorm1d(12), nn.ReLU(), nn.Linear(12, 2))
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)


def test() -> float:
    net.eval()
    with torch.no_grad():
        return (net(x).argmax(1) == y).float().mean().item()


net.train()
for epoch in range(3):  # expect: TG102
    for start in range(0, 40, 10):
        optimizer.zero_grad()
        loss = F.cross_entropy(net(x[start:start + 10]), y[start:start + 10])
        loss.backward()
        optimizer.step()
    print(epoch, test())
