# Modelled on udacity/deep-learning-v2-pytorch#3
# (https://github.com/udacity/deep-learning-v2-pytorch/issues/3): validation ran with Dropout
# and BatchNorm still in training mode. Here one epoch function serves both phases and switches
# grad by phase, but it always calls model.train(): that call is the line to change.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def run_epoch(model, loader, optimizer, phase):
    model.train()  # expect: TG101
    total = 0.0
    for features, target in loader:
        with torch.set_grad_enabled(phase == "train"):
            pred = model(features)
            loss = nn.functional.mse_loss(pred, target)
        if phase == "train":
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        total += loss.item() * len(target)
    return total / len(loader.dataset)


torch.manual_seed(0)
x = torch.randn(96, 5)
y = x @ torch.randn(5, 1) + 0.1 * torch.randn(96, 1)
loaders = {"train": DataLoader(TensorDataset(x[:64], y[:64]), batch_size=16, shuffle=True),
           "valid": DataLoader(TensorDataset(x[64:], y[64:]), batch_size=16)}
regressor = nn.Sequential(nn.Linear(5, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.2),
                          nn.Linear(32, 1))
optimizer = torch.optim.SGD(regressor.parameters(), lr=0.05)
for epoch in range(3):
    for phase in ("train", "valid"):
        mse = run_epoch(regressor, loaders[phase], optimizer, phase)
        print(f"epoch {epoch} {phase} mse {mse:.4f}")
