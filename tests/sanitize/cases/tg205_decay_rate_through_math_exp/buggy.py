# Report: https://github.com/pytorch/pytorch/issues/143071
# Modelled on GitHub pytorch/pytorch#143071 ("Python's math module is a footgun": math.exp on a
# tensor gave no error, and the gradients did not propagate): a forecaster smooths its input with
# a learned decay, but the smoothing layer turns the decay's log-rate into a Python number through
# math.exp (which calls float() on the tensor), so the log-rate never receives a gradient while
# the readout trains; the optimizer steps on it for nothing.
import math

import torch
from torch import nn


class ExpSmoothing(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.log_rate = nn.Parameter(torch.tensor(-0.7))

    def forward(self, series):
        decay = math.exp(self.log_rate)  # expect: TG205
        level = series[:, 0]
        for t in range(1, series.shape[1]):
            level = decay * level + (1 - decay) * series[:, t]
        return level


def train_step(smoother, readout, optimizer, series, target):
    prediction = readout(smoother(series).unsqueeze(1)).squeeze(1)
    loss = ((prediction - target) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


torch.manual_seed(5)
smoother, readout = ExpSmoothing(), nn.Linear(1, 1)
optimizer = torch.optim.SGD([*smoother.parameters(), *readout.parameters()], lr=0.05)
for step in range(6):
    series = torch.randn(16, 12).cumsum(dim=1)
    loss = train_step(smoother, readout, optimizer, series, series[:, -1])
print(f"loss {loss.item():.3f} log-rate {smoother.log_rate.item():.3f}")
