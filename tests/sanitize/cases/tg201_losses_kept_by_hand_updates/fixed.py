# Fixed twin of buggy.py (https://github.com/StanfordASL/neural-network-lyapunov/pull/140): the
# history keeps Python numbers.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
params = list(model.parameters())
x = torch.randn(64, 2)


def closure():
    for p in params:
        p.grad = None
    loss = (model(x) - x.pow(2).sum(1, keepdim=True)).pow(2).mean()
    loss.backward()
    return loss


def descent_step(lr=0.05):
    loss = closure()
    with torch.no_grad():
        for p in params:
            p -= lr * p.grad
    return loss


history = []
for it in range(40):
    loss = descent_step()
    history.append(loss.item())
print(history[-1])
