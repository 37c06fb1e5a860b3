# Modelled on princeton-vl/pytorch_stacked_hourglass#44
# (https://github.com/princeton-vl/pytorch_stacked_hourglass/issues/44): one function runs both the
# training and the validation phase (`for phase in ["train", "valid"]`), and the model stays in
# train mode for validation, so BatchNorm's running statistics are updated with validation batches.
# The same line calls the model in both phases, from the same callers, with grad on: only the
# DataLoader differs.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(7)


def run_epoch(model, loader, criterion, optimizer, train):
    total, seen = 0.0, 0
    for x, y in loader:
        loss = criterion(model(x), y)  # expect: TG101
        if train:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        total += loss.item() * len(y)
        seen += len(y)
    return total / seen


x_all = torch.randn(224, 12)
y_all = (x_all[:, 0] * x_all[:, 1] > 0).long()
loaders = {"train": DataLoader(TensorDataset(x_all[:192], y_all[:192]), batch_size=32,
                               shuffle=True),
           "valid": DataLoader(TensorDataset(x_all[192:], y_all[192:]), batch_size=16)}
model = nn.Sequential(nn.Linear(12, 48), nn.BatchNorm1d(48), nn.ReLU(), nn.Linear(48, 2))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
model.train()
for epoch in range(3):
    for phase in ["train", "valid"]:
        loss = run_epoch(model, loaders[phase], criterion, optimizer, train=phase == "train")
        print(epoch, phase, round(loss, 3))
