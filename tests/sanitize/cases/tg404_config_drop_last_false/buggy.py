# Modelled on GitHub conservationtechlab/animl-py#330
# (https://github.com/conservationtechlab/animl-py/issues/330): the training DataLoader's
# drop_last comes from the configuration, and a last, small batch upsets BatchNorm. Here the
# settings keep drop_last False with 9 samples in batches of 4, so the last batch holds one
# sample and BatchNorm1d raises; the line to change is the setting, not the loader.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

SETTINGS = {
    "batch": 4,
    "drop_last": False,  # expect: TG404
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
