"""TG405's window of device losses (``LossWindow``): one in-place add per step marks a NaN or Inf
loss, and the first such step of the window is named. Run here on the CPU (read at once); on
CUDA the same window is copied without blocking (tests/sanitize/test_cuda_runs.py)."""

from __future__ import annotations

import pytest
import torch

from trainguard.sanitize.core.values import LossWindow


def _filled(values, dtype=torch.float32):
    w = LossWindow(torch.device("cpu"))
    for step, v in enumerate(values, start=1):
        w.add(torch.tensor(v, dtype=dtype, requires_grad=True) * 1.0, step, f"train.py:{step}")
    w.send()
    return w


def test_finite_losses_leave_the_window_clean():
    w = _filled([0.5, 1e30, -3.0, 0.0])
    assert w.ready() and w.first_non_finite() is None


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_the_first_non_finite_step_is_named(bad, dtype):
    w = _filled([0.5, 0.4, bad, 0.3, bad], dtype)
    assert w.first_non_finite() == (3, "train.py:3")


def test_a_window_fills_at_its_size_and_leaves_the_losses_alone():
    w = LossWindow(torch.device("cpu"))
    loss = torch.tensor(2.0, requires_grad=True) * 3.0
    for step in range(LossWindow.SIZE):
        assert not w.full
        w.add(loss, step, None)
    assert w.full
    assert loss.item() == 6.0 and loss.grad_fn is not None  # read only
