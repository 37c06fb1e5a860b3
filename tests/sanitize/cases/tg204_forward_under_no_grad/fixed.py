# Fixed twin of buggy.py (https://deepinout.com/pytorch/pytorch-questions/75_pytorch_runtime_error_element_0_of_tensors_does_not_require_grad_and_does_not_have_a_grad_fn.html):
# only the metric's baseline is computed under no_grad.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(8)
model = nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(16, 6), torch.randn(16, 1)


def train_step() -> float:
    with torch.no_grad():
        baseline = F.mse_loss(torch.zeros_like(y), y)
    prediction = model(x)
    loss = F.mse_loss(prediction, y) / baseline
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


train_step()
