# Report: https://github.com/alibaba/TorchEasyRec/pull/88
# Modelled on alibaba/TorchEasyRec#88 ("prevent divide by zero loss weight") with the Dynamic
# Weight Average of lorenmt/mtan: each task's weight comes from the ratio of its two previous
# (detached) losses. An auxiliary task whose batches hold no positive label has a loss of exactly
# 0, so its ratio is 0 / 0 = NaN; the weights need no gradient, so no graph node records that
# division, and the weighted sum carries the NaN into the loss. Fixed: the divisor is kept off 0.
import torch
from torch import nn
from torch.nn import functional as F


class TwoTaskNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(10, 32), nn.ReLU())
        self.main = nn.Linear(32, 1)
        self.aux = nn.Linear(32, 1)

    def forward(self, x):
        h = self.trunk(x)
        return self.main(h).squeeze(1), self.aux(h).squeeze(1)


class DynamicWeightAverage:
    def __init__(self, tasks: int, temperature: float = 2.0) -> None:
        self.tasks, self.temperature = tasks, temperature
        self.history: list = []  # the detached task losses of earlier steps

    def weights(self):
        if len(self.history) < 2:
            return torch.ones(self.tasks)
        rate = self.history[-1] / self.history[-2].clamp_min(1e-8)
        return self.tasks * torch.softmax(rate / self.temperature, 0)

    def record(self, losses) -> None:
        self.history = (self.history + [torch.stack([l.detach() for l in losses])])[-2:]


def aux_loss(logit, positive):
    # a ranking term over the positive examples only: exactly 0 when the batch holds none
    return (F.softplus(-logit) * positive).sum() / positive.numel()


torch.manual_seed(0)
model = TwoTaskNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
dwa = DynamicWeightAverage(2)
for step in range(6):
    x, y = torch.randn(16, 10), torch.randn(16)
    positive = torch.zeros(16)  # no positive example in these batches
    pred, logit = model(x)
    losses = [F.mse_loss(pred, y), aux_loss(logit, positive)]
    w = dwa.weights()
    loss = (w * torch.stack(losses)).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    dwa.record(losses)
    print(f"step {step}: loss {loss.item():.4f}")
