# Monte Carlo dropout on a network that also has BatchNorm, written by keeping the whole model in
# training mode at prediction time (the usual shortcut for MC dropout, see the fast.ai forum
# proposal https://forums.fast.ai/t/pr-ability-to-use-dropout-at-prediction-time-monte-carlo-dropout/47080
# and the BatchNorm caveat discussed in Teye et al., "Bayesian Uncertainty Estimation for Batch
# Normalized Deep Networks", https://arxiv.org/abs/1802.06455). Every draw normalizes the test
# batch with its own statistics and moves BatchNorm's running mean and variance toward the test
# data, so the "uncertainty" mixes BatchNorm noise into dropout's and the saved model changes.
# Fixed twin: eval() first, then only the Dropout modules back in training mode.
import torch
from torch import nn


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(10, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.3),
                         nn.Linear(32, 2))


def train(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model.train()
    for _ in range(4):
        for i in range(0, len(x), 32):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x[i:i + 32]), y[i:i + 32]).backward()
            opt.step()


def mc_predict(model: nn.Module, x: torch.Tensor, passes: int = 25) -> torch.Tensor:
    model.train()  # keeps dropout on, and BatchNorm in batch-stats mode too  # expect: TG101
    with torch.no_grad():
        probs = [model(x).softmax(-1) for _ in range(passes)]
    return torch.stack(probs).mean(0)


torch.manual_seed(0)
x = torch.randn(256, 10)
y = (x[:, 0] > 0).long()
model = make_model()
train(model, x, y)
test_x = torch.randn(64, 10)
mean = mc_predict(model, test_x)
print("agreement", (mean.argmax(1) == (test_x[:, 0] > 0).long()).float().mean().item())
