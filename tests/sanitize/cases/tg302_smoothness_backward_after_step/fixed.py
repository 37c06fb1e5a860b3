# Report: https://discuss.pytorch.org/t/what-step-backward-and-zero-grad-do/33301
# Modelled on the order that thread spells out (zero_grad, then every backward, then step): a
# forecaster trainer applies its update right after the forecast loss's backward and only then
# backpropagates a smoothness penalty on the hidden states. The penalty's gradients land on
# parameters whose step has already run, and the next batch's zero_grad clears them, so the
# penalty never shapes the model. Here the update runs after both backward calls.
import torch
from torch import nn


class Forecaster(nn.Module):
    def __init__(self, window: int, hidden: int) -> None:
        super().__init__()
        self.encode = nn.Sequential(nn.Linear(window, hidden), nn.Tanh())
        self.head = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.encode(x)
        return self.head(h).squeeze(-1), h


class Trainer:
    def __init__(self, model: Forecaster, smooth_weight: float = 0.1) -> None:
        self.model = model
        self.smooth_weight = smooth_weight
        self.optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    def _update(self) -> None:
        self.optimizer.step()

    def _smoothness(self, hidden: torch.Tensor) -> torch.Tensor:
        # consecutive windows should have nearby hidden states
        penalty = self.smooth_weight * (hidden[1:] - hidden[:-1]).pow(2).mean()
        penalty.backward()
        return penalty.detach()

    def train_batch(self, x: torch.Tensor, y: torch.Tensor) -> float:
        self.optimizer.zero_grad()
        pred, hidden = self.model(x)
        loss = nn.functional.mse_loss(pred, y)
        loss.backward()
        pred, hidden = self.model(x)
        penalty = self._smoothness(hidden)
        self._update()
        return loss.item() + penalty.item()


torch.manual_seed(11)
series = torch.sin(torch.linspace(0, 40, 600)) + 0.05 * torch.randn(600)
windows = series.unfold(0, 17, 1)
inputs, targets = windows[:, :16], windows[:, 16]
trainer = Trainer(Forecaster(16, 24))
for start in range(0, 480, 32):
    total = trainer.train_batch(inputs[start:start + 32], targets[start:start + 32])
print(f"last objective {total:.4f}")
