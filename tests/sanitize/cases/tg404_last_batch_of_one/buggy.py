# Modelled on GitHub pytorch/pytorch#4534 ("nn.BatchNorm1d fails with batch size 1",
# https://github.com/pytorch/pytorch/issues/4534) and fastai/fastai#1352 (the last batch of an epoch): 33 samples in batches of
# 8 leave a last batch of one sample, and BatchNorm1d cannot compute its statistics.
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train() -> None:
    torch.manual_seed(17)
    data = TensorDataset(torch.randn(33, 4), torch.randint(0, 2, (33,)))
    loader = DataLoader(data, batch_size=8, shuffle=True)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)  # expect: TG404
        loss.backward()
        optimizer.step()


train()
