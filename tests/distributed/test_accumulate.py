"""Gradient accumulation under DDP (2 gloo ranks on CPU): one all-reduce per optimizer step.

Counted by a DDP communication hook (``register_comm_hook``): every micro-batch but the last of
each accumulation window runs inside ``no_sync()``, including the short window that ends an
epoch.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import torch

from test_ddp import _finish, _run, _standalone, _start
from trainguard.ckpt.checkpoint import load_checkpoint

WORKER = str(Path(__file__).resolve().parent / "accumulate_worker.py")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not torch.distributed.is_available(), reason="no torch.distributed"),
]


def _counts(out: str) -> dict[int, int]:
    return {int(r): int(n) for r, n in re.findall(r"rank=(\d) allreduce-count=(\d+)", out)}


def _shas(out: str) -> set[str]:
    return set(re.findall(r"weights_sha256=([0-9a-f]{64})", out))


@pytest.fixture(scope="module")
def no_sync_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("acc") / "no_sync"
    tensorboard = ["--tensorboard"] if importlib.util.find_spec("tensorboard") else []
    out = _run(_standalone() + [WORKER, str(run_dir), *tensorboard])
    return run_dir, out


def test_one_all_reduce_per_optimizer_step(no_sync_run):
    run_dir, out = no_sync_run
    assert "steps=6 " in out
    assert _counts(out) == {0: 6, 1: 6}  # 2 epochs x windows of 3, 3 and 2 micro-batches


def test_weights_equal_the_run_that_syncs_every_micro_step(no_sync_run, tmp_path):
    run_dir, _ = no_sync_run
    out = _run(_standalone() + [WORKER, str(tmp_path / "every"), "--sync-every-micro-step"])
    assert _counts(out) == {0: 16, 1: 16}  # one per micro-batch: what no_sync saves
    synced = load_checkpoint(tmp_path / "every" / "last.pt")["model"]
    accumulated = load_checkpoint(run_dir / "last.pt")["model"]
    for key, value in synced.items():
        torch.testing.assert_close(accumulated[key], value, rtol=1e-5, atol=1e-7)


def test_a_stop_mid_window_resumes_bit_exactly(no_sync_run, tmp_path):
    run_dir, reference = no_sync_run
    stopped = tmp_path / "stopped"
    # the 5th training forward is the 2nd micro-batch of the 2nd window: the window finishes,
    # then every rank stops after optimizer step 2
    code, out = _finish(_start(_standalone() + [WORKER, str(stopped), "--stop-at-micro", "5"]))
    assert code != 0, out[-3000:]
    ckpt = load_checkpoint(stopped / "last.pt")
    assert (ckpt["reason"], ckpt["step"], ckpt["batches_done"]) == ("signal", 2, 6)
    assert _counts(out) == {0: 2, 1: 2}
    out = _run(_standalone() + [WORKER, str(stopped), "--resume"])
    assert _counts(out) == {0: 4, 1: 4} and "steps=6 " in out
    assert _shas(out) == _shas(reference) and len(_shas(out)) == 1


def test_rank_0_alone_writes_the_tensorboard_events(no_sync_run):
    pytest.importorskip("tensorboard")
    run_dir, _ = no_sync_run
    assert len(list((run_dir / "tensorboard").glob("events.out.tfevents.*"))) == 1
