"""TG405 names the data when a loss's target already holds NaN/Inf (TencentAILabHealthcare/
scPROTEIN#3: regression labels with NaN entries), and does not when the target is finite."""

from __future__ import annotations

import io

import torch
from torch import nn
from torch.nn import functional as F

from trainguard.config import Config
from trainguard.sanitize.checks.tg405_non_finite_loss import NonFiniteLoss
from trainguard.sanitize.watcher import Watcher


def _run(target_nan: bool) -> Watcher:
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    watcher = Watcher(config=Config(), stream=io.StringIO(), checks=[NonFiniteLoss]).start()
    try:
        for _ in range(3):
            x, y = torch.randn(8, 4), torch.rand(8, 2)
            if target_nan:
                y[1, 0] = float("nan")  # a label that was never measured
            out = model(x)
            # finite target: a log of 0 in the loss computation (a prediction clipped to 0)
            loss = F.mse_loss(out, y) if target_nan else -torch.log(out.clamp(0, 1)).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    finally:
        watcher.stop()
    return watcher


def test_target_with_nan_is_named_as_the_data():
    found = _run(target_nan=True).findings
    assert [f.code for f in found] == ["TG405"]
    assert "the target given to mse_loss" in found[0].message
    assert "1 of 16 values" in found[0].message
    assert "the data, not the model" in found[0].message
    assert "so the loss computation made it non-finite" not in found[0].message
    assert "isfinite(target)" in found[0].fix


def test_finite_target_is_not_blamed():
    found = _run(target_nan=False).findings
    assert [f.code for f in found] == ["TG405"]
    assert "the data" not in found[0].message
    assert "target" not in found[0].message
