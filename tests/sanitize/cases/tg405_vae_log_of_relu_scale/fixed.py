# Fixed twin of buggy.py (https://github.com/RasmussenLab/vamb/issues/12): the rate comes out of a
# Softplus head, which is positive everywhere, so log(rate) stays finite.
import torch
from torch import nn


class CountRegressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 16), nn.Tanh())
        self.rate_head = nn.Sequential(nn.Linear(16, 1), nn.Softplus())

    def forward(self, x):
        h = self.body(x)
        rate = self.rate_head(h)
        return rate.squeeze(-1)


def poisson_nll(rate, counts):
    return (rate - counts * torch.log(rate)).mean()


def run(epochs=2):
    torch.manual_seed(11)
    model = CountRegressor()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.randn(64, 6)
    counts = torch.poisson(torch.full((64,), 3.0))
    for epoch in range(epochs):
        for i in range(0, 64, 16):
            loss = poisson_nll(model(x[i:i + 16]), counts[i:i + 16])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return loss.item()


print("loss", run())
