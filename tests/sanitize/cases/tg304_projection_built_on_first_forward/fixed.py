# Modelled on prism-science/WaterFlow#78 (https://github.com/prism-science/WaterFlow/pull/78): a
# projection whose input width is only known when features arrive is created inside forward() on
# the first call, while the optimizer was built from model.parameters() before that call, so the
# projection receives gradients and never changes.
import torch
from torch import nn


class PointEncoder(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.width = width
        self.proj = None
        self.out = nn.Linear(width, 1)

    def forward(self, feats):
        if self.proj is None:  # built once, on the first call
            self.proj = nn.Linear(feats.shape[-1], self.width)
        return self.out(torch.relu(self.proj(feats))).squeeze(-1)


torch.manual_seed(4)
model = PointEncoder()
with torch.no_grad():  # a dry run builds the projection
    model(torch.zeros(1, 5))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(96, 5), torch.randn(96)
for epoch in range(4):
    for i in range(0, 96, 8):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x[i:i + 8]), y[i:i + 8])
        loss.backward()
        optimizer.step()
print(f"final loss {loss.item():.4f}")
