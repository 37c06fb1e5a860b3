# Modelled on TiagoCortinhal/SalsaNext#40 "Set dropout to training in monte-carlo mode while
# inference" (https://github.com/TiagoCortinhal/SalsaNext/issues/40) and Gal & Ghahramani,
# "Dropout as a Bayesian Approximation" (https://arxiv.org/abs/1506.02142): a regression net
# whose dropout is always on (`training=True`), put in eval mode and forwarded many times on the
# same inputs to estimate predictive uncertainty (Monte Carlo dropout). A correct program that
# stays silent: the repeated draws of one unchanged input are the method, not a forgotten flag.
import torch
import torch.nn.functional as F
from torch import nn


class BayesianMLP(nn.Module):
    def __init__(self, p=0.2):
        super().__init__()
        self.fc1 = nn.Linear(1, 32)
        self.fc2 = nn.Linear(32, 32)
        self.out = nn.Linear(32, 1)
        self.p = p

    def forward(self, x):
        x = F.dropout(F.relu(self.fc1(x)), p=self.p, training=True)
        x = F.dropout(F.relu(self.fc2(x)), p=self.p, training=True)
        return self.out(x)


def fit(model, x, y, steps=20):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        loss = F.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


@torch.no_grad()
def predict_with_uncertainty(model, x, samples=10):
    model.eval()
    draws = torch.stack([model(x) for _ in range(samples)])
    return draws.mean(0), draws.std(0)


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.linspace(-2, 2, 64).unsqueeze(1)
    y = torch.sin(3 * x) + 0.1 * torch.randn_like(x)
    model = BayesianMLP()
    fit(model, x, y)
    grid = torch.linspace(-3, 3, 16).unsqueeze(1)
    mean, std = predict_with_uncertainty(model, grid)
    print(mean.squeeze(1)[:4], std.squeeze(1)[:4])
