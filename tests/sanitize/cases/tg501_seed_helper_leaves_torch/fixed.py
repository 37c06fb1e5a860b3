# Report: https://github.com/ourownstory/neural_prophet/issues/147
# An estimator reseeds before every fit through its own helper, which seeds numpy, random and
# torch, so two fits with the same seed agree.
import random

import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)


def set_random_seed(seed=0):
    np.random.seed(seed)
    random.seed(seed)
    torch.manual_seed(seed)


class Forecaster:
    def __init__(self, lags=8, seed=0):
        self.lags, self.seed = lags, seed

    def fit(self, series, epochs=3):
        set_random_seed(self.seed)
        self.model = nn.Sequential(nn.Linear(self.lags, 16), nn.ReLU(), nn.Linear(16, 1))
        opt = torch.optim.Adam(self.model.parameters(), lr=1e-2)
        x = torch.stack([series[i:i + self.lags] for i in range(len(series) - self.lags)])
        y = series[self.lags:].unsqueeze(1)
        for _ in range(epochs):
            for idx in torch.randperm(len(x)).split(16):
                loss = nn.functional.mse_loss(self.model(x[idx]), y[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
        return self


series = torch.sin(torch.arange(200) / 8.0)
a, b = Forecaster().fit(series), Forecaster().fit(series)
print(torch.equal(a.model[0].weight, b.model[0].weight))
