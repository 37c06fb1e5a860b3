# Fixed twin of buggy.py (https://discuss.pytorch.org/t/runtimeerror-element-0-of-variables-does-not-require-grad-and-does-not-have-a-grad-fn/11074):
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
