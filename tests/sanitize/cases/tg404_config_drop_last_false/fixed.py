# Fixed twin: the settings drop the last, partial batch.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

SETTINGS = {
    "batch": 4,
    "drop_last": True,
    "lr": 0.1,
}


def make_loader(opts):
    data = TensorDataset(torch.randn(9, 4), torch.randn(9, 1))
    return DataLoader(data, batch_size=opts["batch"], drop_last=opts["drop_last"])


torch.manual_seed(5)
net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 1))
opt = torch.optim.SGD(net.parameters(), lr=SETTINGS["lr"])
for xb, yb in make_loader(SETTINGS):
    opt.zero_grad()
    nn.functional.mse_loss(net(xb), yb).backward()
    opt.step()
