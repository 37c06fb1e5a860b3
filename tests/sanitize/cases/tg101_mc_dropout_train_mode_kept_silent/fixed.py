# Near miss for TG101: Monte Carlo dropout (Gal and Ghahramani, "Dropout as a Bayesian
# Approximation", https://arxiv.org/abs/1506.02142) written the short way, as in the fast.ai
# forum proposal "Ability to use dropout at prediction time (Monte Carlo Dropout)"
# (https://forums.fast.ai/t/pr-ability-to-use-dropout-at-prediction-time-monte-carlo-dropout/47080):
# the regressor's only mode-dependent layers are dropouts (an LSTM's dropout between layers and a
# Dropout before the head), the model stays in training mode after fit on purpose, and each test
# window goes through it 20 times under no_grad; the draws' mean is the prediction and their
# spread the uncertainty. The same input is drawn again and again: sampling, not an evaluation
# that forgot eval(). Must stay silent.
import torch
from torch import nn


class Forecaster(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.LSTM(1, 16, num_layers=2, dropout=0.2, batch_first=True)
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x)
        return self.head(self.drop(out[:, -1]))


def windows(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    t = torch.linspace(0, 20, n + 13)
    wave = torch.sin(t)
    x = torch.stack([wave[i:i + 12] for i in range(n)]).unsqueeze(-1)
    return x, wave[12:12 + n].unsqueeze(-1)


def fit(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> None:
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model.train()
    for _ in range(3):
        for i in range(0, len(x), 16):
            opt.zero_grad()
            nn.functional.mse_loss(model(x[i:i + 16]), y[i:i + 16]).backward()
            opt.step()


@torch.no_grad()
def predict_with_uncertainty(model: nn.Module, x: torch.Tensor, draws: int = 20):
    samples = torch.stack([model(x) for _ in range(draws)])
    return samples.mean(0), samples.std(0)


torch.manual_seed(0)
model = Forecaster()
x, y = windows(96)
fit(model, x, y)
test_x, test_y = windows(24)
mean, spread = predict_with_uncertainty(model, test_x)
print("mse", nn.functional.mse_loss(mean, test_y).item(), "mean spread", spread.mean().item())
