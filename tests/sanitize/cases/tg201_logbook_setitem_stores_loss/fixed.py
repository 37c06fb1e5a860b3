# Fixed twin of buggy.py (ray-project/ray#40940,
# https://github.com/ray-project/ray/pull/40940): the logbook is handed the loss as a number.
import torch
from torch import nn


class Logbook:
    def __init__(self, *columns):
        self.columns = {name: [] for name in columns}

    def clear(self, name):
        self.columns[name] = []

    def __setitem__(self, name, value):
        self.columns[name].append(value)

    def last(self, name):
        return self.columns[name][-1]


def fit(model, xs, ys, steps=10):
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    book = Logbook("step", "mse")
    book.clear("mse")
    for step in range(steps):
        loss = nn.functional.mse_loss(model(xs), ys)
        opt.zero_grad()
        loss.backward()
        opt.step()
        book["step"] = step
        book["mse"] = loss.item()
    return book


torch.manual_seed(0)
xs = torch.randn(40, 3)
ys = xs @ torch.tensor([[1.0], [-2.0], [0.5]])
book = fit(nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1)), xs, ys)
print("final mse", float(book.last("mse")))
