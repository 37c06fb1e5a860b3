# Modelled on NVIDIA/apex#132 (https://github.com/NVIDIA/apex/pull/132): "During eval, it's
# possible to end up caching casted weights with requires_grad=False" -- a layer caches its weight
# cast to another dtype on its first call, which is an evaluation under torch.no_grad(); every
# training forward reuses the grad-less cast, so backward raises "element 0 of tensors does not
# require grad and does not have a grad_fn".
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(11)


class CastLinear(nn.Module):
    """A linear layer computed in float64, its weight cast once and kept."""

    def __init__(self, d_in, d_out):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d_out, d_in) * 0.1)
        self.cast_weight = None

    def forward(self, x):
        if self.cast_weight is None:
            self.cast_weight = self.weight.to(torch.float64)  # expect: TG204
        return x.to(torch.float64) @ self.cast_weight.t()


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
