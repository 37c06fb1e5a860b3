# Fixed twin of buggy.py (https://github.com/karpathy/nanoGPT/issues/136): F.normalize divides by
# max(norm, eps), so an all-zero row stays zero instead of NaN.
import torch
from torch import nn


class Embedder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(6, 4, bias=False)

    def forward(self, x):
        return nn.functional.normalize(self.encoder(x), dim=1, eps=1e-8)


torch.manual_seed(13)
model = Embedder()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
targets = nn.functional.normalize(torch.randn(8, 4), dim=1)
for step in range(5):
    x = torch.randn(8, 6)
    if step == 2:
        x[3] = 0.0
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), targets)
    loss.backward()
    optimizer.step()
print(f"loss {loss.item()}")
