# Modelled on knazeri/edge-connect#9 (https://github.com/knazeri/edge-connect/issues/9): the
# trainer calls model.train() once, then hands every iteration to callable callbacks
# (`for cb in self.callbacks: cb(self, it)`); the sampling callback puts the model in eval mode
# and never switches back, so the following iterations train with BatchNorm frozen. The
# callback's own eval() is the line to change.
import torch
from torch import nn
import torch.nn.functional as F


class SampleCallback:
    def __call__(self, trainer, it):
        if it % 3 == 0:
            trainer.model.eval()  # expect: TG102
            with torch.no_grad():
                trainer.samples.append(trainer.model(trainer.fixed).clone())


class Trainer:
    def __init__(self, callbacks):
        torch.manual_seed(0)
        self.model = nn.Sequential(nn.Linear(6, 12), nn.BatchNorm1d(12), nn.ReLU(),
                                   nn.Linear(12, 1))
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.callbacks, self.samples = callbacks, []
        self.fixed = torch.randn(4, 6)

    def train(self, iters):
        self.model.train()
        for it in range(1, iters + 1):
            x = torch.randn(8, 6)
            loss = F.mse_loss(self.model(x), x.sum(1, keepdim=True))
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            for cb in self.callbacks:
                cb(self, it)


Trainer([SampleCallback()]).train(10)
