"""TG403 when only the input grows: a (N, 1) critic output against a (N, K) target (a SAC target
built from a per-dimension log-probability that was not summed), and the silent converse, one
target for every head of a (N, K) output."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from sanitize_helpers import findings_of
from trainguard.sanitize.checks.tg403_loss_broadcast import LossBroadcast


def _fit(pred_dim: int, target_dim: int) -> None:
    torch.manual_seed(0)
    critic = nn.Linear(6, pred_dim)
    opt = torch.optim.SGD(critic.parameters(), lr=0.1)
    for _ in range(3):
        s = torch.randn(16, 6)
        log_prob = torch.randn(16, target_dim)  # per action dimension
        target = torch.randn(16, 1) - 0.2 * log_prob
        loss = F.mse_loss(critic(s), target)
        opt.zero_grad()
        loss.backward()
        opt.step()


def test_a_prediction_compared_with_several_targets_is_reported():
    findings = findings_of(lambda: _fit(1, 4), LossBroadcast)
    assert findings and "each prediction is compared with 4 target values" in \
        findings[0].message, findings


def test_one_target_for_every_head_is_silent():
    assert findings_of(lambda: _fit(4, 1), LossBroadcast) == []
