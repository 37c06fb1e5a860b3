# Modelled on GitHub eth-easl/modyn#550 (https://github.com/eth-easl/modyn/pull/550, "Parameterize
# drop_last"): a training configuration class carries a drop_last_batch field that the trainer
# passes to its DataLoader. Here its default is False, and 97 samples in batches of 16 leave a
# last batch of one, which BatchNorm1d cannot train on. The line to change is the field's default.
# Fixed twin: the default is True.
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


@dataclass
class TrainingConfig:
    batch_size: int = 16
    epochs: int = 1
    drop_last_batch: bool = False  # expect: TG404


def train(config: TrainingConfig) -> None:
    data = TensorDataset(torch.randn(97, 6), torch.randint(0, 3, (97,)))
    loader = DataLoader(data, batch_size=config.batch_size, shuffle=True,
                        drop_last=config.drop_last_batch)
    model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.train()
    for _ in range(config.epochs):
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


torch.manual_seed(0)
train(TrainingConfig())
