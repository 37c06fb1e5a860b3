"""seed_everything, derive_seed, weights_sha256 and the epoch batch sampler."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from torch import nn

from trainguard.ckpt.fingerprint import weights_sha256
from trainguard.ckpt.rng import capture_rng, restore_rng
from trainguard.ckpt.seeding import derive_seed, seed_everything
from trainguard.data.sampler import EpochBatchSampler


def _draws():
    return (random.random(), float(np.random.rand()), torch.rand(1).item())


def test_seed_everything_seeds_all_three():
    seed_everything(5)
    a = _draws()
    seed_everything(5)
    assert _draws() == a
    seed_everything(6)
    assert _draws() != a
    with pytest.raises(TypeError):
        seed_everything(1.5)


def test_capture_and_restore_every_rng():
    gen = torch.Generator().manual_seed(3)
    state = capture_rng(gen)
    a = (*_draws(), torch.rand(1, generator=gen).item(), float(np.random.randn()))
    restore_rng(state, gen)
    b = (*_draws(), torch.rand(1, generator=gen).item(), float(np.random.randn()))
    assert a == b


def test_rng_state_loads_with_weights_only(tmp_path):
    np.random.randn()  # leave a cached gaussian in numpy's state
    state = capture_rng(None)
    torch.save(state, tmp_path / "rng.pt")
    loaded = torch.load(tmp_path / "rng.pt", weights_only=True)
    a = _draws()
    restore_rng(loaded)
    assert _draws() == a


def test_derive_seed_is_stable_and_spreads():
    assert derive_seed(0, 1) == derive_seed(0, 1)
    assert len({derive_seed(0, e) for e in range(1000)}) == 1000
    assert derive_seed(0, 1, 2) != derive_seed(0, 2, 1)
    assert 0 <= derive_seed(2**70, 3) < 2**63


def test_weights_sha256_ignores_wrapper_prefixes_and_sees_every_byte():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    sha = weights_sha256(model)
    prefixed = {f"module._orig_mod.{k}": v for k, v in model.state_dict().items()}
    assert weights_sha256(prefixed) == sha
    with torch.no_grad():
        model[0].weight[0, 0] = torch.nextafter(model[0].weight[0, 0], torch.tensor(1.0))
    assert weights_sha256(model) != sha
    model2 = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    model2.load_state_dict(model.state_dict())
    assert weights_sha256(model2) == weights_sha256(model)
    assert weights_sha256(model.double()) != weights_sha256(model2)  # dtype counts


def test_sampler_order_is_a_function_of_seed_and_epoch():
    s = EpochBatchSampler(10, 3, shuffle=True, seed=1)
    s.set_epoch(0)
    e0 = list(s)
    s.set_epoch(1)
    e1 = list(s)
    s.set_epoch(0)
    assert list(s) == e0 and e0 != e1
    assert sorted(i for b in e0 for i in b) == list(range(10))
    s.set_epoch(1)
    s.skip(2)
    assert list(s) == e1[2:]
    assert list(s) == e1  # skip applies once


def test_sampler_drops_a_final_batch_of_one_for_training():
    assert [len(b) for b in EpochBatchSampler(7, 3, shuffle=True, drop_last_single=True)] == [3, 3]
    assert [len(b) for b in EpochBatchSampler(7, 3, shuffle=False)] == [3, 3, 1]
    assert [len(b) for b in EpochBatchSampler(8, 3, shuffle=True, drop_last_single=True)] == \
        [3, 3, 2]


def test_sampler_shards_cover_the_data_across_ranks():
    shards = [EpochBatchSampler(10, 2, shuffle=True, seed=4, num_replicas=3, rank=r)
              for r in range(3)]
    seen = [i for s in shards for b in s for i in b]
    assert len(seen) == 12 and set(seen) == set(range(10))
    assert len({len(s) for s in shards}) == 1
