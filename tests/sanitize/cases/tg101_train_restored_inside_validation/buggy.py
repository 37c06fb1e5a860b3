# Modelled on GitHub pliang279/MultiBench#26
# (https://github.com/pliang279/MultiBench/issues/26): the validation function calls model.eval()
# and, a few lines later, model.train() again before the validation batches run, so accuracy is
# measured with Dropout dropping and BatchNorm on batch statistics.
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(3)
x, y = torch.randn(96, 6), torch.randint(0, 3, (96,))
train_loader = DataLoader(TensorDataset(x[:64], y[:64]), batch_size=16, shuffle=True)
val_loader = DataLoader(TensorDataset(x[64:], y[64:]), batch_size=16)


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(6, 24), nn.BatchNorm1d(24), nn.ReLU(), nn.Dropout(0.3),
                         nn.Linear(24, 3))


def train_epoch(model, optimizer):
    model.train()
    for xb, yb in train_loader:
        optimizer.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        optimizer.step()


def validate(model):
    model.eval()
    correct = 0
    with torch.no_grad():
        for xb, yb in val_loader:
            model.train()  # expect: TG101
            correct += (model(xb).argmax(1) == yb).sum().item()
    return correct / 32


model = make_model()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(3):
    train_epoch(model, optimizer)
    print(epoch, validate(model))
