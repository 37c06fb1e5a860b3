"""TG405 on a run that diverged (a learning rate too large for inputs on large scales): the message
says that the loss grew and what overflowed, not log/division/sqrt. Modelled on the classic
"loss becomes inf/NaN after a few iterations" regression thread
(https://discuss.pytorch.org/t/getting-nan-after-first-iteration-with-custom-loss/25929)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from sanitize_helpers import findings_of
from trainguard.sanitize.checks.tg405_non_finite_loss import NonFiniteLoss


def _regression(lr: float, scale: float) -> None:
    torch.manual_seed(0)
    x = torch.rand(256, 3) * scale  # unnormalized features
    y = x @ torch.tensor([[1000.0], [50.0], [20.0]])
    model = nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for step in range(30):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x[step % 4::4]), y[step % 4::4])
        loss.backward()
        optimizer.step()


def test_a_diverging_regression_is_called_divergence_with_the_overflowing_output():
    [finding] = findings_of(lambda: _regression(lr=0.01, scale=300.0), NonFiniteLoss)
    message = finding.message
    assert finding.code == "TG405" and "the loss is inf" in message, message
    assert "training diverged" in message and "after the loss grew from " in message, message
    # the model's output was finite but beyond sqrt(float32 max) = 1.8e19
    assert "was finite but reached " in message and "squares only values up to 1.8e+19" in message
    assert "log of 0" not in message
    assert finding.fix.startswith("lower the learning rate, normalize the inputs")


def test_a_loss_made_non_finite_by_a_log_of_zero_is_not_called_divergence():
    def run() -> None:
        torch.manual_seed(0)
        model = nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
        for step in range(12):
            optimizer.zero_grad()
            x = torch.randn(8, 4)
            p = torch.sigmoid(model(x))
            if step == 9:
                p = p * 0  # log(0) = -inf
            loss = -torch.log(p).mean()
            loss.backward()
            optimizer.step()

    [finding] = findings_of(run, NonFiniteLoss)
    assert "training diverged" not in finding.message, finding.message
    assert "log of 0" in finding.message and "finite but reached" not in finding.message
    assert finding.fix.startswith("lower the learning rate or clip gradients")


@pytest.mark.parametrize("first,latest,said", [
    ((1, 2.0, "a"), (5, 1e7, "a"), True),     # beyond 1e6
    ((1, 2.0, "a"), (5, 3000.0, "a"), True),  # 1500x growth
    ((1, 2.0, "a"), (5, 1500.0, "a"), False),  # 750x, under 1e6
    ((1, 2.0, "a"), (5, 1e7, "b"), False),    # another backward line (a GAN's other loss)
])
def test_divergence_needs_growth_on_the_same_backward_line(first, latest, said):
    check = NonFiniteLoss.__new__(NonFiniteLoss)
    check.first, check.latest, check.scaled = first, latest, False
    assert bool(check._diverged("a")) is said
