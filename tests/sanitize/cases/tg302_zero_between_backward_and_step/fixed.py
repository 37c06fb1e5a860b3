# Fixed twin of buggy.py (https://pytorch.org/tutorials/beginner/basics/optimization_tutorial.html):
# zero_grad before the backward; a second loop zeroes at the end of the step instead, with
# model.zero_grad(set_to_none=False) - both are correct.
import torch
from torch import nn

torch.manual_seed(0)
x = torch.randn(64, 4)
y = x @ torch.tensor([[2.0], [-1.0], [0.5], [1.0]])
model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = nn.MSELoss()

for step in range(5):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
optimizer.zero_grad()

for step in range(5):
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    model.zero_grad(set_to_none=False)

for step in range(3):  # gradients set by hand after zeroing: not a zeroed step
    loss = loss_fn(model(x), y)
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    optimizer.zero_grad()
    for p, g in zip(model.parameters(), grads):
        p.grad = g.clamp(-1.0, 1.0)
    optimizer.step()
print(f"loss {loss.item():.3f}")
