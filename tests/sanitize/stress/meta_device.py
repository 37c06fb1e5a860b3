"""A model trained 3 steps on the ``meta`` device (tensors without data: shapes and dtypes only),
as done to check a model's shapes or count its memory before materializing it
(https://pytorch.org/docs/stable/meta.html). No value can be read there."""

import torch
from torch import nn

torch.manual_seed(0)
with torch.device("meta"):
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.BatchNorm1d(32), nn.Linear(32, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
criterion = nn.CrossEntropyLoss()
for step in range(3):
    x = torch.randn(8, 16, device="meta")
    y = torch.randint(0, 4, (8,), device="meta")
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
