"""TG403's diagnosis of PyTorch's own size error in the binary cross-entropy losses: the shapes
are read from the messages PyTorch raises now, and the fix fits the two shapes."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trainguard.sanitize.checks.tg403_loss_broadcast import LossBroadcast
from trainguard.sanitize.watcher import Watcher


@pytest.fixture
def check():
    return LossBroadcast(Watcher(checks=[]))


def _error(loss: nn.Module, given: tuple[int, ...], target: tuple[int, ...]) -> ValueError:
    with pytest.raises(ValueError) as info:
        loss(torch.rand(given), torch.rand(target))
    return info.value


@pytest.mark.parametrize("loss", [nn.BCELoss(), nn.BCEWithLogitsLoss()], ids=type)
@pytest.mark.parametrize("given, target, fix", [
    ((16, 1), (16,), "output.squeeze(-1)"),
    ((16,), (16, 1), "target.squeeze(-1)"),
    ((4, 2), (4,), "CrossEntropyLoss"),
    ((6, 4), (4, 6), "view_as"),
    ((128, 6, 6), (128,), "same shape"),
])
def test_the_diagnosis_names_both_shapes_and_the_fitting_fix(check, loss, given, target, fix):
    diagnosis = check.on_error(_error(loss, given, target))
    assert diagnosis is not None
    assert f"input {given} and target {target}" in diagnosis.message
    assert fix in diagnosis.fix


def test_other_value_errors_get_no_diagnosis(check):
    assert check.on_error(ValueError("Target size mismatch")) is None
    assert check.on_error(RuntimeError(
        "Using a target size (torch.Size([4])) that is different to the input size "
        "(torch.Size([4, 1]))")) is None
