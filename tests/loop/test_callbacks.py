"""Callbacks through ``fit``: the hooks' order and values, stopping, early stopping, errors."""

from __future__ import annotations

import json
import os
import signal

import pytest
import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook
from torch.utils.data import DataLoader, TensorDataset

import trainguard
from trainguard.ckpt.checkpoint import load_checkpoint
from trainguard.errors import UsageError
from trainguard.loop.callbacks import Callback, CallbackError, EarlyStopping
from trainguard.loop.fit import TrainingInterrupted, fit


def _data(n=48, seed=0):
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(n, 6, generator=g), torch.randint(0, 3, (n,), generator=g))


def _fit(tmp_path=None, *, callbacks, epochs=2, lr=0.1, accumulate=1, **kwargs):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    history = fit(model, DataLoader(_data(), batch_size=8), DataLoader(_data(16, 1), batch_size=8),
                  torch.optim.SGD(model.parameters(), lr=lr), nn.CrossEntropyLoss(),
                  epochs=epochs, device="cpu", progress="none", callbacks=callbacks,
                  accumulate_grad_batches=accumulate, plot=False,
                  run_dir=tmp_path, **kwargs)
    return model, history


class Recorder:
    """A plain class (no base): logs every hook to a list."""

    def __init__(self):
        self.calls = []

    def on_fit_start(self, state):
        self.calls.append(("fit_start", state.epoch, state.step))

    def on_epoch_start(self, state):
        self.calls.append(("epoch_start", state.epoch, state.step))

    def on_step_end(self, state, loss):
        assert not loss.requires_grad and loss.grad_fn is None and loss.ndim == 0
        self.calls.append(("step", state.step, loss.item()))

    def on_validation_end(self, state, metrics):
        self.calls.append(("validation", state.epoch, dict(metrics)))

    def on_epoch_end(self, state, row):
        self.calls.append(("epoch_end", state.epoch, dict(row), len(state.history)))

    def on_fit_end(self, state):
        self.calls.append(("fit_end", state.epoch, state.step))


def test_hooks_come_in_order_with_the_loop_state():
    rec = Recorder()
    _, history = _fit(callbacks=[rec], epochs=2)
    kinds = [c[0] for c in rec.calls]
    per_epoch = ["epoch_start"] + ["step"] * 6 + ["validation", "epoch_end"]
    assert kinds == ["fit_start"] + per_epoch * 2 + ["fit_end"]
    assert [c[1] for c in rec.calls if c[0] == "step"] == list(range(1, 13))
    ends = [c for c in rec.calls if c[0] == "epoch_end"]
    assert [e[2] for e in ends] == history.rows  # the metrics.csv rows, as the history has them
    assert [e[3] for e in ends] == [1, 2]  # the view's history already holds the epoch
    validation = [c[2] for c in rec.calls if c[0] == "validation"]
    assert validation[0] == {k: v for k, v in history.rows[0].items()
                             if k in ("epoch", "train_loss", "val_loss", "val_accuracy")}
    assert rec.calls[-1] == ("fit_end", 2, 12)


@pytest.mark.parametrize("accumulate", [1, 4])
def test_the_step_loss_is_the_steps_sample_weighted_loss(accumulate):
    rec = Recorder()
    # lr=0: the weights stay put, so each step's loss can be recomputed afterwards
    model, _ = _fit(callbacks=[rec], epochs=1, lr=0.0, accumulate=accumulate)
    x, y = _data().tensors
    per = 8 * accumulate
    with torch.no_grad():
        expected = [nn.functional.cross_entropy(model(x[i:i + per]), y[i:i + per]).item()
                    for i in range(0, 48, per)]
    got = [c[2] for c in rec.calls if c[0] == "step"]
    assert got == pytest.approx(expected, rel=1e-6)


def test_the_view_is_read_only():
    class Meddler(Callback):
        def on_step_end(self, state, loss):
            state.step = 100

    with pytest.raises(CallbackError, match=r"Meddler\.on_step_end raised AttributeError: "
                                            r"LoopView\.step is read-only"):
        _fit(callbacks=[Meddler()])


def test_a_callback_may_stop_mid_epoch_and_the_run_ends_cleanly(tmp_path):
    class StopAtThree(Callback):
        def on_step_end(self, state, loss):
            if state.step == 3:
                state.request_stop("enough")

    rec = Recorder()
    _, history = _fit(tmp_path, callbacks=[StopAtThree(), rec], epochs=3)
    assert history.stopped_early and history.stopped_epoch == 1 and history.step == 3
    assert history.rows == [] and history.stop_reason == "enough"
    assert rec.calls[-1] == ("fit_end", 0, 3)  # fit_end after a requested stop
    ckpt = load_checkpoint(tmp_path / "last.pt")
    assert ckpt["step"] == 3 and ckpt["reason"] == "stop"
    assert ckpt["stopped"] == {"epoch": 1, "reason": "enough"}
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["stopped_early"] is True and summary["stopped_epoch"] == 1
    assert summary["stop_reason"] == "enough"


def _snapshot(folder):
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in folder.iterdir()
            if p.is_file()}


def test_early_stopping_ends_the_run_and_resume_trains_no_further(tmp_path, capsys):
    # lr=0: the validation loss never improves after the first epoch
    _, history = _fit(tmp_path, callbacks=[EarlyStopping("val_loss", patience=2)], epochs=10,
                      lr=0.0)
    assert history.stopped_early and history.stopped_epoch == 3 and len(history.rows) == 3
    assert "val_loss did not improve by more than 0 for 2 epoch(s) (best" in history.stop_reason
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (summary["stopped_early"], summary["stopped_epoch"]) == (True, 3)
    before = _snapshot(tmp_path)
    steps = []
    handle = register_optimizer_step_post_hook(
        lambda *a: steps.append(1))
    try:
        _, again = _fit(tmp_path, callbacks=[EarlyStopping("val_loss", patience=2)],
                        epochs=10, lr=0.0, resume=tmp_path)
    finally:
        handle.remove()
    assert steps == [] and again.stopped_epoch == 3 and again.rows == history.rows
    assert again.weights_sha256 == history.weights_sha256
    assert _snapshot(tmp_path) == before  # nothing written
    assert "stopped at epoch 3 (EarlyStopping" in capsys.readouterr().err


def test_early_stopping_state_survives_an_interruption(tmp_path):
    # 6 steps per epoch; SIGTERM in the 3rd epoch: EarlyStopping has waited 1 epoch, and after
    # resuming it must stop at the end of epoch 3, as the uninterrupted run does (not at epoch 4)
    def stop_at_13(optimizer, args, kwargs):
        stop_at_13.n += 1
        if stop_at_13.n == 13:
            os.kill(os.getpid(), signal.SIGTERM)
    stop_at_13.n = 0
    handle = register_optimizer_step_post_hook(stop_at_13)
    try:
        with pytest.raises(TrainingInterrupted):
            _fit(tmp_path, callbacks=[EarlyStopping(patience=2)], epochs=10, lr=0.0,
                 handle_signals=True)
    finally:
        handle.remove()
    saved = load_checkpoint(tmp_path / "last.pt")["callbacks"]["EarlyStopping"]
    assert (saved["wait"], saved["best_epoch"]) == (1, 1)
    _, history = _fit(tmp_path, callbacks=[EarlyStopping(patience=2)], epochs=10, lr=0.0,
                      resume=tmp_path)
    assert history.stopped_epoch == 3 and len(history.rows) == 3


def test_a_callback_that_raises_stops_the_run_and_the_last_good_checkpoint_stays(tmp_path):
    class Boom(Callback):
        def on_step_end(self, state, loss):
            if state.step == 5:
                raise ValueError("no more")

    with pytest.raises(CallbackError, match=r"callback Boom\.on_step_end raised ValueError: "
                                            r"no more") as info:
        _fit(tmp_path, callbacks=[Boom()], epochs=2, checkpoint_every_steps=2)
    assert isinstance(info.value.__cause__, ValueError) and info.value.callback == "Boom"
    assert load_checkpoint(tmp_path / "last.pt")["step"] == 4
    assert not (tmp_path / "summary.json").exists()
    _, resumed = _fit(tmp_path, callbacks=[], epochs=2, checkpoint_every_steps=2,
                      resume=tmp_path)
    _, reference = _fit(tmp_path / "ref", callbacks=[], epochs=2, checkpoint_every_steps=2)
    assert resumed.weights_sha256 == reference.weights_sha256


@pytest.mark.parametrize("values,mode,min_delta,stops_at", [
    ([1.0, 0.9, 0.95, 0.97], "min", 0.0, 4),     # improved once, then 2 epochs without
    ([1.0, 0.99, 0.98, 0.97], "min", 0.05, 3),   # improvements below min_delta do not count
    ([0.5, 0.6, 0.6, 0.6], "max", 0.0, 4),       # mode max: a tie is no improvement
    ([float("nan"), 1.0, 1.1, 1.2], "min", 0.0, 4),  # NaN is never an improvement
])
def test_early_stopping_decides_like_its_definition(values, mode, min_delta, stops_at):
    class View:
        reason = None

        def request_stop(self, reason):
            self.reason = reason

    es, view = EarlyStopping("m", patience=2, min_delta=min_delta, mode=mode), View()
    stopped = None
    for epoch, value in enumerate(values, start=1):
        es.on_epoch_end(view, {"epoch": epoch, "m": value})
        if view.reason and stopped is None:
            stopped = epoch
    assert stopped == stops_at


def test_early_stopping_names_a_missing_metric_and_bad_arguments():
    with pytest.raises(CallbackError, match=r"EarlyStopping\(monitor='val_acc'\): no such metric"
                                            r".*'val_accuracy'"):
        _fit(callbacks=[EarlyStopping("val_acc")])
    for kwargs, needle in [({"patience": 0}, "patience"), ({"min_delta": -1}, "min_delta"),
                           ({"mode": "up"}, "mode")]:
        with pytest.raises(UsageError, match=needle):
            EarlyStopping(**kwargs)


@pytest.mark.parametrize("callbacks,needle", [
    (Recorder(), "must be a list"),
    ([Recorder], "pass an instance"),
    ([object()], "defines none of the hooks"),
])
def test_bad_callbacks_are_usage_errors(callbacks, needle):
    with pytest.raises(UsageError, match=needle):
        _fit(callbacks=callbacks)


def test_public_names():
    assert trainguard.EarlyStopping is EarlyStopping and trainguard.Callback is Callback
