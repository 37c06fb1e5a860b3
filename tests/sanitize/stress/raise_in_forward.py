"""A forward that raises on some batches (a malformed sample), caught by the loop, which skips the
batch and goes on: the exception passes through the model's call and the sanitizer's wrappers
every 7th step."""

import torch
from torch import nn

from _weights import save

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))

    def forward(self, x):
        if x.shape[1] != 8:
            raise ValueError(f"expected 8 features, got {x.shape[1]}")
        return self.body(x)


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
skipped = 0
for step in range(400):
    x = torch.randn(16, 8 if step % 7 else 9)
    y = torch.randint(0, 3, (16,))
    optimizer.zero_grad()
    try:
        loss = nn.functional.cross_entropy(model(x), y)
    except ValueError:
        skipped += 1
        continue
    loss.backward()
    optimizer.step()
print("skipped", skipped)
save(model)
