"""fit(compile=...): plain state_dicts in checkpoints, resume across compiled and eager runs, and
the fallback when compiling fails."""

from __future__ import annotations

import json
import os
import shutil
import signal
import warnings

import pytest
import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook
from torch.utils.data import DataLoader, TensorDataset

from cliutil import run_cli
from trainguard.ckpt.checkpoint import load_checkpoint
from trainguard.loop.compiling import CompileFallbackWarning
from trainguard.loop.fit import TrainingInterrupted, fit


def _data(n=48, seed=0):
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(n, 6, generator=g), torch.randint(0, 3, (n,), generator=g))


class Net(nn.Module):
    def __init__(self, bug=False):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.Tanh())
        self.head = nn.Linear(5 if bug else 8, 3)

    def forward(self, x):
        return self.head(self.body(x))


def _fit(run_dir=None, *, compile=False, stop_at=None, resume=None, bug=False):
    torch.manual_seed(0)
    model = Net(bug)
    handle = None
    if stop_at is not None:
        def hook(optimizer, args, kwargs, count=[0]):
            count[0] += 1
            if count[0] == stop_at:
                os.kill(os.getpid(), signal.SIGTERM)
        handle = register_optimizer_step_post_hook(hook)
    try:
        return model, fit(
            model, DataLoader(_data(), batch_size=8), DataLoader(_data(16, 1), batch_size=8),
            torch.optim.AdamW(model.parameters(), lr=1e-2), nn.CrossEntropyLoss(), epochs=2,
            device="cpu", progress="none", compile=compile, run_dir=run_dir, plot=False,
            handle_signals=stop_at is not None, resume=resume, seed=0)
    finally:
        if handle is not None:
            handle.remove()


def _failing_backend(graph_module, example_inputs):
    raise RuntimeError("no C++ compiler found (stand-in for a broken toolchain)")


def test_a_compile_failure_falls_back_with_one_warning_naming_the_cause():
    _, eager = _fit()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _, compiled = _fit(compile={"backend": _failing_backend})
    fallbacks = [w for w in seen if issubclass(w.category, CompileFallbackWarning)]
    assert len(fallbacks) == 1, [str(w.message) for w in seen]
    assert "no C++ compiler found" in str(fallbacks[0].message)
    assert compiled.weights_sha256 == eager.weights_sha256  # the same steps, run eagerly


def test_an_error_of_the_model_itself_is_raised_not_blamed_on_compiling():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match="mat1 and mat2 shapes cannot be multiplied"):
            _fit(compile={"backend": "eager"}, bug=True)
    assert not [w for w in seen if issubclass(w.category, CompileFallbackWarning)]


@pytest.mark.parametrize("first,then", [(True, False), (False, True)])
def test_compiled_and_eager_runs_resume_each_other(tmp_path, first, then):
    # TorchDynamo with the "eager" backend: the compile wrapper without inductor's numerics,
    # so the resumed run must equal the uninterrupted one exactly
    as_compile = {True: {"backend": "eager"}, False: False}
    _, reference = _fit(tmp_path / "ref")
    with pytest.raises(TrainingInterrupted):
        _fit(tmp_path / "run", compile=as_compile[first], stop_at=8)
    ckpt = load_checkpoint(tmp_path / "run" / "last.pt")
    assert list(ckpt["model"]) == list(Net().state_dict())  # no "_orig_mod." prefix
    model, resumed = _fit(tmp_path / "run", compile=as_compile[then], resume=tmp_path / "run")
    assert resumed.weights_sha256 == reference.weights_sha256
    assert not hasattr(model, "_orig_mod")  # the user's module is left as it was


@pytest.mark.slow
def test_compile_trains_the_digits_and_its_checkpoint_resumes_eagerly(tmp_path):
    run = tmp_path / "compiled"
    proc = run_cli("train", "--compile", "--run-dir", str(run), "--progress", "none",
                   "--checkpoint-every-steps", "270", "--keep-last", "2")
    assert proc.returncode == 0, proc.stderr
    assert "CompileFallbackWarning" not in proc.stderr  # inductor compiled on this machine
    summary = json.loads((run / "summary.json").read_text())
    assert summary["best_val_accuracy"] >= 0.98 and summary["epochs"] == 12
    # the compiled run's checkpoint of step 270 (epoch 6) finishes without --compile
    again = tmp_path / "eager"
    again.mkdir()
    shutil.copy(run / "step-000000270.pt", again / "last.pt")
    ckpt = load_checkpoint(again / "last.pt")
    assert ckpt["step"] == 270 and not any(k.startswith("_orig_mod") for k in ckpt["model"])
    proc = run_cli("train", "--resume", str(again), "--progress", "none")
    assert proc.returncode == 0, proc.stderr
    assert "resumed from" in proc.stderr
    resumed = json.loads((again / "summary.json").read_text())
    assert resumed["best_val_accuracy"] >= 0.98 and resumed["steps"] == 540
