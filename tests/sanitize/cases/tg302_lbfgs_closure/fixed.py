# Near miss for TG301-TG303: LBFGS re-evaluates the loss through a closure that zeroes the
# gradients and calls backward inside optimizer.step(), as torch.optim documents
# (https://pytorch.org/docs/stable/optim.html#optimizer-step-closure).
import torch
from torch import nn

torch.manual_seed(1)
x = torch.randn(32, 3)
y = x @ torch.tensor([[1.0], [2.0], [-1.0]]) + 0.5
model = nn.Linear(3, 1)
optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=5)


def closure():
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss


for step in range(4):
    loss = optimizer.step(closure)
print(f"loss {loss.item():.4f}")
