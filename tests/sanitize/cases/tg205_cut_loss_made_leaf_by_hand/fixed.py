# Modelled on GitHub ronghuaiyang/arcface-pytorch#56
# (https://github.com/ronghuaiyang/arcface-pytorch/issues/56): backward raised "element 0 of
# tensors does not require grad", the reporter added `loss.requires_grad = True`, the error went
# away, and the loss never declined. Here the feature normalisation is written with torch
# operations, so the loss carries the graph and needs no flag. A small face-embedding classifier
# on random features.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(6)


class Embedder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(24, 32), nn.ReLU(), nn.Linear(32, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.body(x), dim=1)


model = Embedder()
centers = torch.randn(5, 8)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(8):
    x, y = torch.randn(16, 24), torch.randint(0, 5, (16,))
    loss = F.cross_entropy(model(x) @ centers.t() * 10, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
