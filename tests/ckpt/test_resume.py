"""Interrupt and resume: the resumed run ends with the uninterrupted run's weights."""

from __future__ import annotations

import os
import signal

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from trainguard.ckpt.checkpoint import load_checkpoint
from trainguard.data.loaders import make_loader
from trainguard.errors import CheckpointError
from trainguard.loop.fit import TrainingInterrupted, fit


def _dataset(n=96, seed=0):
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(n, 8, generator=g), torch.randint(0, 4, (n,), generator=g))


def _model():
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.3),
                         nn.Linear(16, 4))


def _run(run_dir, *, loader_kind, interrupt_at=None, resume=None, accumulate=1, epochs=3,
         workers=0):
    model = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    train, val = _dataset(), _dataset(32, seed=1)
    if loader_kind == "trainguard":
        loader = make_loader(train, batch_size=8, train=True, seed=3, num_workers=workers)
    else:  # a user's own loader: global-RNG shuffling, no generator of its own
        loader = DataLoader(train, batch_size=8, shuffle=True, num_workers=workers)
    steps = []
    if interrupt_at is not None:
        def hook(optimizer, args, kwargs):
            steps.append(1)
            if len(steps) == interrupt_at:
                os.kill(os.getpid(), signal.SIGTERM)
        opt.register_step_post_hook(hook)
    return fit(model, loader, DataLoader(val, batch_size=16), opt, nn.CrossEntropyLoss(),
               epochs=epochs, device="cpu", seed=11, scheduler=sched, run_dir=run_dir,
               accumulate_grad_batches=accumulate, progress="none", handle_signals=True,
               resume=resume, plot=False)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = {}
    for kind in ("trainguard", "user"):
        for acc in (1, 3):
            h = _run(tmp_path_factory.mktemp("ref"), loader_kind=kind, accumulate=acc)
            out[kind, acc] = h
    return out


@pytest.mark.parametrize("kind", ["trainguard", "user"])
@pytest.mark.parametrize("accumulate,stop", [(1, 1), (1, 7), (1, 12), (1, 13), (1, 30),
                                             (3, 2), (3, 5)])
def test_sigterm_then_resume_gives_the_same_weights(tmp_path, reference, kind, accumulate, stop):
    # 12 batches per epoch: step 12 ends epoch 1 exactly; 7 and 13 are mid-epoch
    with pytest.raises(TrainingInterrupted) as info:
        _run(tmp_path, loader_kind=kind, interrupt_at=stop, accumulate=accumulate)
    assert info.value.signum == signal.SIGTERM
    assert info.value.checkpoint == tmp_path / "last.pt"
    ckpt = load_checkpoint(tmp_path / "last.pt")
    assert ckpt["step"] == stop and ckpt["reason"] in {"signal", "epoch"}
    resumed = _run(tmp_path, loader_kind=kind, resume=tmp_path, accumulate=accumulate)
    ref = reference[kind, accumulate]
    assert resumed.weights_sha256 == ref.weights_sha256
    assert resumed.rows == [dict(r, elapsed_s=resumed.rows[i]["elapsed_s"])
                            for i, r in enumerate(ref.rows)]


def test_resume_from_a_finished_run_changes_nothing(tmp_path, reference):
    h = _run(tmp_path, loader_kind="trainguard")
    again = _run(tmp_path, loader_kind="trainguard", resume=tmp_path)
    assert again.weights_sha256 == h.weights_sha256 == reference["trainguard", 1].weights_sha256


def test_changed_configuration_is_refused_unless_forced(tmp_path):
    _run(tmp_path, loader_kind="trainguard", epochs=1)
    with pytest.raises(CheckpointError, match=r"accumulate_grad_batches: checkpoint 1, now 2"):
        _run(tmp_path, loader_kind="trainguard", epochs=1, resume=tmp_path, accumulate=2)


def test_checkpoint_of_another_model_lists_mismatched_keys(tmp_path):
    _run(tmp_path, loader_kind="trainguard", epochs=1)
    model = nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.3),
                          nn.Linear(32, 4))
    opt = torch.optim.AdamW(model.parameters())
    with pytest.raises(CheckpointError) as err:
        fit(model, make_loader(_dataset(), batch_size=8, train=True, seed=3), None, opt,
            nn.CrossEntropyLoss(), epochs=1, device="cpu", seed=11, resume=tmp_path / "last.pt",
            force=True, progress="none")
    msg = str(err.value)
    assert "0.weight: checkpoint (16, 8) vs model (32, 8)" in msg
    assert "4.weight: checkpoint (4, 16) vs model (4, 32)" in msg


def test_a_new_run_over_an_old_one_is_refused_unless_forced(tmp_path):
    _run(tmp_path, loader_kind="trainguard", epochs=1)
    (tmp_path / "step-000000005.pt").write_bytes((tmp_path / "last.pt").read_bytes())
    with pytest.raises(CheckpointError, match=r"already holds a run .*--resume"):
        _run(tmp_path, loader_kind="trainguard", epochs=1)
    model = _model()
    fit(model, make_loader(_dataset(), batch_size=8, train=True, seed=3), None,
        torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), epochs=1,
        device="cpu", run_dir=tmp_path, force=True, progress="none", plot=False)
    # the old run's step checkpoint is gone: a later fallback cannot resume the wrong run
    assert sorted(p.name for p in tmp_path.glob("*.pt")) == ["last.pt"]
