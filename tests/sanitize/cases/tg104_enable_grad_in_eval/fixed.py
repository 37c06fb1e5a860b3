# Fixed twin of buggy.py (https://pytorch.org/docs/stable/generated/torch.enable_grad.html):
# prediction stays under no_grad. Near-miss that must stay silent: enable_grad inside no_grad for an
# input gradient that torch.autograd.grad does use.
import torch
from torch import nn

torch.manual_seed(12)
model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
model.eval()
data = torch.randn(12, 3)


def predict(batch: torch.Tensor) -> list[float]:
    return model(batch).squeeze(1).tolist()


def input_gradient(batch: torch.Tensor) -> torch.Tensor:
    with torch.enable_grad():
        batch = batch.clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(model(batch).sum(), batch)
    return grad


with torch.no_grad():
    predictions = [predict(data[i:i + 4]) for i in range(0, 12, 4)]
    gradients = input_gradient(data[:4])
print(len(predictions), tuple(gradients.shape))
