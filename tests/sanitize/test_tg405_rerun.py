"""TG405's one-time re-run of a forward (to name the first non-finite module) must leave the run's
numbers unchanged: BatchNorm running statistics restored, Dropout's RNG draws forked away."""

from __future__ import annotations

import io

import torch
from torch import nn

from trainguard.config import Config
from trainguard.sanitize.checks.tg405_non_finite_loss import NonFiniteLoss
from trainguard.sanitize.watcher import Watcher


class _Log(nn.Module):
    def forward(self, x):
        return torch.log(x)  # NaN for the negative value of the poisoned batch


def _train() -> tuple[dict, torch.Tensor]:
    torch.manual_seed(21)
    model = nn.Sequential(_Log(), nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.3), nn.ReLU(),
                          nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    for step in range(4):
        x = torch.rand(16, 4) + 0.1
        if step == 2:
            x[0, 0] = -1.0  # log gives NaN
        optimizer.zero_grad()
        loss = model(x).mean()
        loss.backward()
        optimizer.step()
    return {k: v.clone() for k, v in model.state_dict().items()}, torch.get_rng_state()


def test_rerun_changes_no_weight_buffer_or_rng_state():
    plain_state, plain_rng = _train()
    stream = io.StringIO()
    watcher = Watcher(config=Config(), stream=stream, checks=[NonFiniteLoss]).start()
    try:
        watched_state, watched_rng = _train()
    finally:
        watcher.stop()
    codes = [f.code for f in watcher.findings]
    assert codes == ["TG405"], stream.getvalue()
    assert "first module whose output is non-finite is `0` (_Log)" in watcher.findings[0].message
    assert torch.equal(plain_rng, watched_rng)
    for key, value in plain_state.items():
        assert torch.equal(value, watched_state[key]) or (
            value.isnan().any() and torch.equal(value.isnan(), watched_state[key].isnan())), key
