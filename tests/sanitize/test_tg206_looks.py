"""TG206 at run time looks at the storages at most once per EVERY optimizer steps per optimizer,
and still finds a storage shared late in a run, whichever of several optimizers steps."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from sanitize_helpers import findings_of
from trainguard.sanitize.checks import tg206_data_attribute as tg206
from trainguard.sanitize.checks.tg206_data_attribute import DataAttribute


def _loop(steps: int, share_at: int | None, optimizers: int = 1) -> None:
    """``optimizers`` models trained in turn, one optimizer each; at ``share_at`` a target copy
    of the first model is made to share its weight's storage (``.data`` assignment)."""
    torch.manual_seed(0)
    models = [nn.Linear(4, 2) for _ in range(optimizers)]
    target = nn.Linear(4, 2)
    target(torch.randn(1, 4))  # (a model seen by the watcher)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in models]
    for step in range(steps):
        model, opt = models[step % optimizers], opts[step % optimizers]
        opt.zero_grad()
        F.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 2)).backward()
        opt.step()
        if step == share_at:
            target.weight.data = models[0].weight.data


def test_looks_thin_out_over_a_long_run(monkeypatch):
    looks = []
    original = tg206._model_parameters
    monkeypatch.setattr(tg206, "_model_parameters", lambda models: looks.append(1) or
                        original(models))
    from trainguard.config import Config
    from trainguard.sanitize.watcher import Watcher

    watcher = Watcher(config=Config(), checks=[DataAttribute], every_step=True).start()
    try:
        _loop(400, None)
    finally:
        watcher.stop()
    assert watcher.state.step == 400
    assert 400 // 16 <= len(looks) <= 60  # every step for 8 steps, then thinning out


def test_a_storage_shared_late_is_still_found():
    found = findings_of(lambda: _loop(150, 120), DataAttribute)
    assert [f.code for f in found] == ["TG206"]


def test_each_of_alternating_optimizers_gets_its_looks():
    # the shared weight belongs to the first of two optimizers, which steps on even steps only
    found = findings_of(lambda: _loop(300, 201, optimizers=2), DataAttribute)
    assert [f.code for f in found] == ["TG206"]


def test_no_finding_without_sharing():
    assert findings_of(lambda: _loop(100, None, optimizers=2), DataAttribute) == []
