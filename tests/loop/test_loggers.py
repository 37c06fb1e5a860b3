"""Loggers: TensorBoard event files read back with TensorBoard's own reader equal metrics.csv."""

from __future__ import annotations

import csv
import os

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from cliutil import cli_env, run_cli
from trainguard.errors import UsageError
from trainguard.loop.callbacks import Callback, CallbackError
from trainguard.loop.fit import fit

BLOCK_TENSORBOARD = '''
import sys

class _NoTensorBoard:
    def find_spec(self, name, path=None, target=None):
        if name == "tensorboard" or name.startswith("tensorboard."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoTensorBoard())
'''


def _data(n=48, seed=0):
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(n, 6, generator=g), torch.randint(0, 3, (n,), generator=g))


class StepLosses(Callback):
    def __init__(self, fail_at=None):
        self.losses, self.fail_at = {}, fail_at

    def on_step_end(self, state, loss):
        if state.step == self.fail_at:
            raise RuntimeError("stop here")
        self.losses[state.step] = loss.item()


def _fit(run_dir, *, callbacks=(), resume=None, epochs=3, loggers=("csv", "tensorboard")):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return fit(model, DataLoader(_data(), batch_size=8), DataLoader(_data(16, 1), batch_size=8),
               opt, nn.CrossEntropyLoss(), epochs=epochs, device="cpu", progress="none",
               run_dir=run_dir, loggers=list(loggers), log_every_steps=2, plot=False,
               scheduler=torch.optim.lr_scheduler.StepLR(opt, 1, 0.5), callbacks=list(callbacks),
               resume=resume)


def _scalars(folder):
    """{tag: [(step, value)]} as TensorBoard's reader gives them (purges applied)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def _f32(text):
    return float(np.float32(float(text)))  # TensorBoard stores scalars as float32


def _check_against_metrics_csv(run_dir, scalars):
    rows = list(csv.DictReader((run_dir / "metrics.csv").open()))
    for column in ("epoch", "train_loss", "val_loss", "val_accuracy", "lr"):
        assert [v for _, v in scalars[column]] == [_f32(r[column]) for r in rows], column
    assert [s for s, _ in scalars["val_loss"]] == [6, 12, 18]  # the step that ended each epoch


def test_tensorboard_event_files_hold_the_values_of_metrics_csv(tmp_path):
    pytest.importorskip("tensorboard")
    losses = StepLosses()
    _fit(tmp_path, callbacks=[losses])
    scalars = _scalars(tmp_path / "tensorboard")
    _check_against_metrics_csv(tmp_path, scalars)
    assert scalars["train_loss_step"] == [(s, float(np.float32(losses.losses[s])))
                                          for s in range(2, 19, 2)]
    # StepLR per epoch: steps 2-6 are in epoch 1, 8-12 in epoch 2, 14-18 in epoch 3
    assert [v for _, v in scalars["lr_step"]] == [_f32(lr) for lr in [0.1] * 3 + [0.05] * 3
                                                  + [0.025] * 3]


def test_a_resumed_run_replaces_what_the_stopped_one_logged_after_its_checkpoint(tmp_path):
    pytest.importorskip("tensorboard")
    # the first process logs steps 8 and 10, then fails at 11; its last checkpoint is step 6
    with pytest.raises(CallbackError):
        _fit(tmp_path, callbacks=[StepLosses(fail_at=11)])
    assert [s for s, _ in _scalars(tmp_path / "tensorboard")["train_loss_step"]][-2:] == [8, 10]
    _fit(tmp_path, resume=tmp_path)
    scalars = _scalars(tmp_path / "tensorboard")
    assert len(os.listdir(tmp_path / "tensorboard")) == 2  # one event file per process
    assert [s for s, _ in scalars["train_loss_step"]] == list(range(2, 19, 2))  # no step twice
    _check_against_metrics_csv(tmp_path, scalars)


def test_without_tensorboard_the_cli_exits_2_naming_the_package(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCK_TENSORBOARD)
    env = cli_env()
    env["PYTHONPATH"] = os.pathsep.join([str(site), env["PYTHONPATH"]])
    proc = run_cli("train", "--tensorboard", "--run-dir", str(tmp_path / "run"), env=env)
    assert proc.returncode == 2, proc.stderr
    assert "TensorBoard logging needs the tensorboard package" in proc.stderr
    assert "pip install 'trainguard[tensorboard]'" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "run").exists()


@pytest.mark.parametrize("loggers,needle", [
    ("csv", "must be a list"), (["wandb"], "unknown logger"), ([object()], "no log_epoch")])
def test_bad_loggers_are_usage_errors(loggers, needle):
    model = nn.Linear(6, 3)
    with pytest.raises(UsageError, match=needle):
        fit(model, DataLoader(_data(8), batch_size=4), None,
            torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), device="cpu",
            loggers=loggers, progress="none")


def test_a_logger_object_receives_every_epoch(tmp_path):
    class Rows:
        def __init__(self):
            self.seen = []

        def log_epoch(self, step, row, rows):
            self.seen.append((step, dict(row)))

        def close(self):
            self.seen.append("closed")

    rows = Rows()
    model = nn.Linear(6, 3)
    history = fit(model, DataLoader(_data(), batch_size=8), None,
                  torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(),
                  epochs=2, device="cpu", loggers=[rows], progress="none")
    assert rows.seen == [(6, history.rows[0]), (12, history.rows[1]), "closed"]


def _expected_csv(history_rows):
    import io

    from trainguard.loop.rundir import RunDir

    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=RunDir.metric_columns(history_rows), restval="",
                            lineterminator="\n")
    writer.writeheader()
    writer.writerows([{k: (int(v) if k == "epoch" else v) for k, v in r.items()}
                      for r in history_rows])
    return buf.getvalue()


def test_metrics_csv_appended_per_epoch_equals_the_whole_history_and_a_resume_rewrites_it(
        tmp_path):
    torch.manual_seed(0)
    model = nn.Linear(6, 3)
    history = fit(model, DataLoader(_data(), batch_size=8), DataLoader(_data(16, 1), batch_size=8),
                  torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), epochs=3,
                  device="cpu", progress="none", run_dir=tmp_path / "a", plot=False)
    assert (tmp_path / "a" / "metrics.csv").read_text() == _expected_csv(history.rows)
    # a run stopped after epoch 1's checkpoint, whose metrics.csv holds a row past it
    with pytest.raises(CallbackError):
        _fit(tmp_path / "b", callbacks=[StepLosses(fail_at=11)], loggers=["csv"])
    with open(tmp_path / "b" / "metrics.csv", "a") as fh:
        fh.write("2,0.5,0.5,0.5,0.1,1.0\n3,0.4")  # a stale row and one cut short
    resumed = _fit(tmp_path / "b", resume=tmp_path / "b", loggers=["csv"])
    assert (tmp_path / "b" / "metrics.csv").read_text() == _expected_csv(resumed.rows)


def test_train_with_tensorboard_writes_the_metrics_of_metrics_csv(tmp_path):
    pytest.importorskip("tensorboard")
    run_dir = tmp_path / "run"
    proc = run_cli("train", "--model", "mlp", "--epochs", "2", "--progress", "none",
                   "--tensorboard", "--run-dir", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    scalars = _scalars(run_dir / "tensorboard")
    rows = list(csv.DictReader((run_dir / "metrics.csv").open()))
    assert len(rows) == 2
    for column in ("train_loss", "val_loss", "val_accuracy", "lr"):
        assert [v for _, v in scalars[column]] == [_f32(r[column]) for r in rows], column
