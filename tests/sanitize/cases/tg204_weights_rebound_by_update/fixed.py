# Modelled on the manual gradient-descent step of https://mlkatas.com/kata/23: the update is made
# in place, so w and b stay the leaves the loss is differentiated for.
import torch

torch.manual_seed(3)
x = torch.randn(64, 2)
y = x @ torch.tensor([1.5, -2.0]) + 0.3


def fit(steps=5, lr=0.1):
    w = torch.zeros(2, requires_grad=True)
    b = torch.zeros((), requires_grad=True)
    for _ in range(steps):
        loss = ((x @ w + b - y) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            w -= lr * w.grad
            b -= lr * b.grad
        w.grad = None
        b.grad = None
    return w, b


fit()
