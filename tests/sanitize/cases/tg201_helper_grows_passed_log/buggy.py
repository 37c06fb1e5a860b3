# Modelled on pnnl/neuromancer#292 (https://github.com/pnnl/neuromancer/pull/292): training
# metrics were stored without detaching them, so each step's autograd graph stayed alive for
# the whole run. Here a sensor-forecasting loop hands its run log to a helper after every step;
# the helper computes the batch error from the prediction, which still has its graph, and
# appends it to the log: the helper's append is the line to change.
from types import SimpleNamespace

import torch
from torch import nn


def record(book, pred, target):
    book.errors.append((pred - target).abs().mean())  # expect: TG201


torch.manual_seed(0)
readings = torch.randn(200, 6)
next_value = readings @ torch.randn(6, 1)
forecaster = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
optimizer = torch.optim.SGD(forecaster.parameters(), lr=0.05)
run_log = SimpleNamespace(errors=[])
for start in range(0, 200, 20):
    x, y = readings[start:start + 20], next_value[start:start + 20]
    pred = forecaster(x)
    loss = nn.functional.mse_loss(pred, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    record(run_log, pred, y)
print(f"mean abs error over the run {sum(float(e) for e in run_log.errors) / 10:.4f}")
