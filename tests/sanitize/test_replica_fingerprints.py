"""TG604's fingerprints and replica selection, and TG603's threshold, in one process."""

from __future__ import annotations

import io
import math

import pytest
import torch
import torch.distributed as dist
from torch import nn

from trainguard.config import Config
from trainguard.sanitize.checks.tg603_batchnorm_not_synced import SMALL_BATCH, BatchNormNotSynced
from trainguard.sanitize.core.replicas import (decode, encode, fingerprint, first_difference,
                                          is_checkpoint, plan_replicas)
from trainguard.sanitize.watcher import Watcher

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="no torch.distributed")


def test_checkpoints_follow_a_1_2_5_series():
    assert [s for s in range(0, 1001) if is_checkpoint(s)] == [
        1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]


def test_fingerprint_is_torchs_float64_sums_and_changes_nothing():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2)).to(torch.float16)
    params = list(model.parameters())
    versions = [p._version for p in params]
    values = fingerprint(params)
    expected = [v for p in params
                for v in (p.double().sum().item(), p.double().abs().sum().item())]
    assert values == expected  # bit-equal
    assert [p._version for p in params] == versions and torch.is_grad_enabled()
    assert all(p.grad is None for p in params)
    assert decode(encode(values)) == values
    assert fingerprint([torch.tensor([1 + 2j, -3j])]) == [0.0, 6.0]  # the real view


@pytest.mark.parametrize("b,index", [
    ([10.0, 20.0, -1.0, 2.0], None),                  # identical
    ([10.0 + 1e-9, 20.0, -1.0, 2.0], None),           # a last-bit difference: within 1e-6
    ([10.0, 20.0, -1.0 + 1e-3, 2.0], 1),              # the second parameter moved
    ([10.5, 20.0, -1.0, 2.0], 0),
    ([math.nan, 20.0, -1.0, 2.0], 0),                 # NaN on one rank only
])
def test_first_difference(b, index):
    assert first_difference([10.0, 20.0, -1.0, 2.0], b) == index


def test_nan_and_inf_on_both_ranks_agree():
    assert first_difference([math.nan, math.inf], [math.nan, math.inf]) is None
    with pytest.raises(ValueError, match="fingerprints of 1 and 2 parameters"):
        first_difference([0.0, 0.0], [0.0, 0.0, 0.0, 0.0])


@pytest.fixture
def one_rank_group():
    """A real gloo process group of one rank in this process (DDP needs one)."""
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_replicas_are_the_ddp_models_parameters(one_rank_group):
    from torch.nn.parallel import DistributedDataParallel as DDP

    inner = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    inner[0].bias.requires_grad_(False)
    ddp = DDP(inner)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    plan = plan_replicas([ddp], [optimizer], world_size=1, sharded=False, live_ddps=[])
    assert (plan.how, plan.names) == ("ddp", ["0.weight", "1.weight", "1.bias"])
    # the forward called ddp.module directly: the wrapper is found among live objects
    plan = plan_replicas([inner], [optimizer], world_size=1, sharded=False, live_ddps=[ddp])
    assert plan.how == "bypassed" and len(plan.params) == 3
    # DDP over a subgroup of a larger job: parameters are replicas only within the group
    assert plan_replicas([ddp], [optimizer], world_size=4, sharded=True, live_ddps=[]).params == []


def test_without_ddp_replicas_need_a_sampler_over_every_rank():
    model = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    assert plan_replicas([model], [optimizer], world_size=2, sharded=False, live_ddps=[]).params == []
    plan = plan_replicas([model], [optimizer], world_size=2, sharded=True, live_ddps=[])
    assert (plan.how, plan.names) == ("unwrapped", ["weight", "bias"])


def test_sharded_models_are_not_replicas():
    class FullyShardedDataParallel(nn.Module):  # stands for FSDP: compared by type name
        def __init__(self) -> None:
            super().__init__()
            self.inner = nn.Linear(2, 1)

    model = FullyShardedDataParallel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    assert plan_replicas([model], [optimizer], world_size=2, sharded=True, live_ddps=[]).params == []


# ---- TG603: the per-rank batch threshold ------------------------------------------------------
class _Group:
    def size(self) -> int:
        return 2


class _Wrapper(nn.Module):
    """Stands for DistributedDataParallel over 2 ranks: calls its module, holds a group."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module
        self.process_group = _Group()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.module(x)


def _tg603(batch: int, monkeypatch, *, frozen: bool = False, forwards: int = 4) -> list:
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    watcher = Watcher(config=Config(), stream=io.StringIO(), checks=[BatchNormNotSynced])
    watcher.checks[0]._ddp = _Wrapper
    watcher.ranks.broken = "no store in this test"
    model = _Wrapper(nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU()))
    if frozen:
        model.module[1].eval()
    watcher.start()
    try:
        for _ in range(forwards):
            model(torch.randn(batch, 1, 6, 6))
        model(torch.randn(1, 1, 6, 6))  # a short last batch after the measured forwards
    finally:
        watcher.stop()
    return watcher.findings


@pytest.mark.parametrize("batch,fires", [(2, True), (SMALL_BATCH - 1, True), (SMALL_BATCH, False),
                                         (64, False)])
def test_tg603_fires_under_16_samples_per_rank(batch, fires, monkeypatch):
    findings = _tg603(batch, monkeypatch)
    assert [f.code for f in findings] == (["TG603"] if fires else [])
    if fires:
        assert f"on {batch} samples per rank (global batch {2 * batch} over 2 ranks)" in \
            findings[0].message
        assert "(1)" in findings[0].message  # the layer's name inside the model


def test_tg603_silent_on_frozen_batchnorm_and_decides_at_exit(monkeypatch):
    assert _tg603(2, monkeypatch, frozen=True) == []
    assert [f.code for f in _tg603(2, monkeypatch, forwards=1)] == ["TG603"]
