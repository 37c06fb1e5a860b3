# Fixed twin of buggy.py (https://github.com/HuiZeng/Grid-Anchor-based-Image-Cropping-Pytorch/issues/2):
# model.train() at the start of every epoch. Near-miss that must stay silent: BatchNorm frozen on
# purpose (the model in train mode, the BatchNorm layer put in eval mode).
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


for epoch in range(3):
    net.train()
    if epoch == 2:
        net[1].eval()  # freeze BatchNorm statistics for the last epoch
    for start in range(0, 40, 10):
        optimizer.zero_grad()
        loss = F.cross_entropy(net(x[start:start + 10]), y[start:start + 10])
        loss.backward()
        optimizer.step()
    print(epoch, test())
