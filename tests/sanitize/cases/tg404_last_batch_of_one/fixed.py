# Fixed twin of buggy.py (https://github.com/pytorch/pytorch/issues/4534): drop_last=True. Near-miss
# that must stay silent: a single-sample prediction in eval mode.
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train() -> None:
    torch.manual_seed(17)
    data = TensorDataset(torch.randn(33, 4), torch.randint(0, 2, (33,)))
    loader = DataLoader(data, batch_size=8, shuffle=True, drop_last=True)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        print(model(torch.randn(1, 4)).argmax(1).item())


train()
