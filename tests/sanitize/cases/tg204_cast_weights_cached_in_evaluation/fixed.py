# Modelled on NVIDIA/apex#132 (https://github.com/NVIDIA/apex/pull/132): the layer casts its
# weight on every call instead of keeping the cast made by the evaluation under torch.no_grad(),
# so the training forward builds the graph to the weight.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(11)


class CastLinear(nn.Module):
    """A linear layer computed in float64, its weight cast on every call."""

    def __init__(self, d_in, d_out):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d_out, d_in) * 0.1)

    def forward(self, x):
        cast_weight = self.weight.to(torch.float64)
        return x.to(torch.float64) @ cast_weight.t()


model = CastLinear(6, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(32, 6), torch.randn(32, 1, dtype=torch.float64)

with torch.no_grad():
    print(f"loss before training {F.mse_loss(model(x), y).item():.4f}")

for step in range(3):
    loss = F.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
