# Modelled on the reports of "element 0 of tensors does not require grad and does not have a
# grad_fn" collected in (https://deepinout.com/pytorch/pytorch-questions/75_pytorch_runtime_error_element_0_of_tensors_does_not_require_grad_and_does_not_have_a_grad_fn.html),
# where a whole training step ended up inside a torch.no_grad() block meant for a metric.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(8)
model = nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(16, 6), torch.randn(16, 1)


def train_step() -> float:
    with torch.no_grad():
        prediction = model(x)  # expect: TG204
        baseline = F.mse_loss(torch.zeros_like(y), y)
    loss = F.mse_loss(prediction, y) / baseline
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


train_step()
