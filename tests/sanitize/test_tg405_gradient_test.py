"""TG405's test of the gradients before a checked step (``core/nonfinite.grads_may_be_finite``):
one op over all of them, joined into one float64 sum for small sets, foreach max-norms for large
ones; both answer alike, and neither changes a gradient."""

from __future__ import annotations

import pytest
import torch

from trainguard.sanitize.core import nonfinite
from trainguard.sanitize.core.nonfinite import grads_may_be_finite


def _grads(dtype: torch.dtype = torch.float32) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randn(shape, generator=g).to(dtype) for shape in ((4, 3), (3,), (2, 2, 2), ())]


@pytest.fixture(params=["joined", "foreach"])
def path(request, monkeypatch):
    if request.param == "foreach":  # every set counts as large
        monkeypatch.setattr(nonfinite, "_JOINED", 0)
    return request.param


def test_finite_gradients_pass(path):
    assert grads_may_be_finite(_grads()) is True


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("at", [0, 2, 3])
def test_one_non_finite_value_anywhere_is_seen(path, bad, at):
    grads = _grads()
    grads[at].view(-1)[-1] = bad
    before = [g.clone() for g in grads]
    assert grads_may_be_finite(grads) is False
    for g, b in zip(grads, before):  # read only
        assert torch.equal(g.isnan(), b.isnan()) and torch.equal(g.nan_to_num(), b.nan_to_num())


def test_opposite_infinities_in_two_tensors_are_seen(path):
    grads = _grads()
    grads[0][0, 0], grads[1][0] = float("inf"), float("-inf")
    assert grads_may_be_finite(grads) is False


def test_mixed_dtypes(path):
    grads = _grads() + _grads(torch.bfloat16) + _grads(torch.float64)
    assert grads_may_be_finite(grads) is True
    grads[5].view(-1)[0] = float("nan")  # a bf16 one
    assert grads_may_be_finite(grads) is False


def test_large_half_precision_values_do_not_overflow_the_joined_sum():
    # 4096 float16 values of 60000 sum to 2.5e8, far past float16's 65504: summed in float64
    grads = [torch.full((64, 64), 60000.0, dtype=torch.float16)]
    assert grads_may_be_finite(grads) is True


def test_a_scaler_only_reference_cycles_keep_is_not_in_use():
    # an earlier run's GradScaler (a notebook cell's, a test's), dropped but not yet collected,
    # must not make this run's NaN loss read as a scaled overflow the scaler skips
    import gc

    assert nonfinite.scaler_in_use() is False
    gc.disable()
    try:
        cycle: dict = {"scaler": torch.amp.GradScaler("cpu")}
        cycle["self"] = cycle
        del cycle
        assert nonfinite.scaler_in_use() is False
        kept = torch.amp.GradScaler("cpu")  # a live one still counts
        assert nonfinite.scaler_in_use() is True
        del kept
    finally:
        gc.enable()
