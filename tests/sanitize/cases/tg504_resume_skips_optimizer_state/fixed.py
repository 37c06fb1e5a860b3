# Modelled on GitHub zylo117/Yet-Another-EfficientDet-Pytorch#269
# (https://github.com/zylo117/Yet-Another-EfficientDet-Pytorch/issues/269): the fixed twin: the
# resume puts back the weights and the optimizer state the checkpoint holds, so SGD's momentum
# continues.
import os
import tempfile

import torch
from torch import nn

torch.manual_seed(3)
x, y = torch.randn(64, 6), torch.randn(64, 2)
path = os.path.join(tempfile.mkdtemp(), "last.pth")


def train(model, optimizer, epochs):
    for _ in range(epochs):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()


net = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2))
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
train(net, opt, 5)
torch.save({"epoch": 5, "model": net.state_dict(), "optimizer": opt.state_dict()}, path)

# a later session: build the run again and resume it from the checkpoint
net = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2))
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
state = torch.load(path, weights_only=True)
net.load_state_dict(state["model"])
opt.load_state_dict(state["optimizer"])
start = state["epoch"]
train(net, opt, 10 - start)
