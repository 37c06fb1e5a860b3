# Modelled on https://github.com/StanfordASL/neural-network-lyapunov/pull/140: a training loop that
# updates the parameters by hand (a steepest-descent step inside a line search, no optimizer)
# appends every step's loss tensor to its history, keeping each step's graph alive. With no
# optimizer step to look at, the watcher looks every 16 backward calls and names the list.
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
    history.append(loss)  # expect: TG201
print(history[-1].item())
