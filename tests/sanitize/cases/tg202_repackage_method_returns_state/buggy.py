# Modelled on GitHub chickenbestlover/RNN-Time-series-Anomaly-Detection#42
# (https://github.com/chickenbestlover/RNN-Time-series-Anomaly-Detection/issues/42): a time-series
# predictor's repackage_hidden() method walks the (h, c) tuple recursively and should give back
# each state detached from its history. Here its base case returns the tensor as it is, so the
# second window's backward reaches into the first window's freed graph. The line to change is
# that return, not the loop's call of the helper. Fixed twin: it returns h.detach().
import torch
import torch.nn.functional as F
from torch import nn


class Predictor(nn.Module):
    def __init__(self, features: int = 3, hidden: int = 16) -> None:
        super().__init__()
        self.rnn = nn.LSTM(features, hidden, batch_first=True)
        self.out = nn.Linear(hidden, features)

    def forward(self, x, hidden):
        y, hidden = self.rnn(x, hidden)
        return self.out(y), hidden

    def repackage_hidden(self, h):
        if isinstance(h, tuple):
            return tuple(self.repackage_hidden(v) for v in h)
        return h  # expect: TG202


torch.manual_seed(5)
series = torch.sin(torch.linspace(0, 30, 241)).repeat(2, 3, 1).transpose(1, 2)
model = Predictor()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
hidden = (torch.zeros(1, 2, 16), torch.zeros(1, 2, 16))
for start in range(0, 200, 40):
    x, target = series[:, start:start + 40], series[:, start + 1:start + 41]
    hidden = model.repackage_hidden(hidden)
    pred, hidden = model(x, hidden)
    loss = F.mse_loss(pred, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
