"""A plain training loop of 2,000 steps: a DataLoader over a TensorDataset, Adam, a per-epoch
StepLR, an evaluation pass under model.eval() and torch.no_grad() every epoch (the shape of the
PyTorch "Optimizing Model Parameters" tutorial,
https://pytorch.org/tutorials/beginner/basics/optimization_tutorial.html)."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from _weights import save

torch.manual_seed(0)
data = TensorDataset(torch.randn(3200, 16), torch.randint(0, 4, (3200,)))
loader = DataLoader(data, batch_size=16, shuffle=True)
val = DataLoader(TensorDataset(torch.randn(256, 16), torch.randint(0, 4, (256,))), batch_size=64)
model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 4))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=4, gamma=0.5)
criterion = nn.CrossEntropyLoss()
for epoch in range(10):  # 200 batches an epoch: 2,000 steps
    model.train()
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    scheduler.step()
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in val:
            correct += (model(x).argmax(1) == y).sum().item()
    print(epoch, correct / 256)
save(model)
