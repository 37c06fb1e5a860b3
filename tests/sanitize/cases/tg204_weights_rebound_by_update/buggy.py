# Modelled on the manual gradient-descent step of https://mlkatas.com/kata/23, whose solution
# sketch says "update using w = w - lr * grad": assigning the result to the name rebinds it to a
# new tensor made under torch.no_grad(), which does not require grad, so the next step's backward
# raises "element 0 of tensors does not require grad and does not have a grad_fn".
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
            w, b = w - lr * w.grad, b - lr * b.grad  # expect: TG204
    return w, b


fit()
