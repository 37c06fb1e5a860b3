# Modelled on GitHub OpenNMT/OpenNMT-py#403
# (https://github.com/OpenNMT/OpenNMT-py/issues/403): `h.detach()` returns a new tensor, so
# calling it without keeping the result does nothing, and the next backward runs into the
# previous batch's freed graph ("Trying to backward through the graph a second time"). Here a
# streaming trainer's `_cut()` method gives the GRU state back detached, but the step calls it
# as a statement of its own. The line to change is that call, not the model call that reads the
# state. Fixed twin: `self.state = self._cut(self.state)`.
import torch
import torch.nn.functional as F
from torch import nn


class Forecaster(nn.Module):
    def __init__(self, channels: int = 2, width: int = 12) -> None:
        super().__init__()
        self.gru = nn.GRU(channels, width, batch_first=True)
        self.head = nn.Linear(width, channels)

    def forward(self, window, state):
        seq, state = self.gru(window, state)
        return self.head(seq), state


class StreamTrainer:
    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=0.05)
        self.state = torch.zeros(1, 4, 12)

    def _cut(self, state):
        return state.detach()

    def step(self, window, target) -> float:
        self.state = self._cut(self.state)
        pred, self.state = self.model(window, self.state)
        loss = F.l1_loss(pred, target)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()

    def fit(self, signal, width: int = 16) -> None:
        for start in range(0, signal.shape[1] - width - 1, width):
            self.step(signal[:, start:start + width], signal[:, start + 1:start + width + 1])


torch.manual_seed(3)
t = torch.linspace(0, 12, 130)
signal = torch.stack([torch.sin(t), torch.cos(2 * t)], -1).repeat(4, 1, 1)
StreamTrainer(Forecaster()).fit(signal)
