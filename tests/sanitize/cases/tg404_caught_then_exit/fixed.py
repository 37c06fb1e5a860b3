# Modelled on RasmussenLab/vamb#5 (https://github.com/RasmussenLab/vamb/issues/5): a VAE over
# contigs trains with a shuffled DataLoader whose last batch holds one contig; the training loop
# catches the "Expected more than 1 value per channel" error, prints its own message and exits
# with status 1. The run still died of that error: the DataLoader is the line to change.
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_loader(n: int, batch: int) -> DataLoader:
    data = TensorDataset(torch.randn(n, 12))
    return DataLoader(data, batch_size=batch, shuffle=True, drop_last=True)


def train(model: nn.Module, loader: DataLoader, epochs: int) -> None:
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    for _ in range(epochs):
        for (x,) in loader:
            loss = ((model(x) - x) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(12, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 12))
try:
    train(model, make_loader(33, 16), epochs=2)
except ValueError as err:
    print(f"training failed: {err}", file=sys.stderr)
    sys.exit(1)
