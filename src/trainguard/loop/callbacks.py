"""Callbacks: code of your own at fixed points of ``fit``, and early stopping built on them.

The hooks, in the order ``fit`` calls them::

    on_fit_start(state)
    for each epoch:
        on_epoch_start(state)
        for each optimizer step:  ... on_step_end(state, loss)
        on_validation_end(state, metrics)      # with a validation loader
        on_epoch_end(state, row)
    on_fit_end(state)                          # after a normal end or a requested stop

``state`` is a :class:`~trainguard.loop.state.LoopView`. A callback defines only the hooks it
needs (subclass :class:`Callback` or write a plain class); a hook that is not defined costs
nothing, so a run without ``on_step_end`` does no per-step work for callbacks. A callback that
keeps state across a resume defines ``state_dict()`` and ``load_state_dict(state)`` (plain values
only: they are stored in the checkpoint).
"""

from __future__ import annotations

import math
from typing import Any, Literal, Sequence

import torch

from trainguard.errors import TrainguardError, UsageError
from trainguard.loop.state import LoopView

__all__ = ["Callback", "EarlyStopping", "CallbackError", "Callbacks", "HOOKS"]

HOOKS = ("on_fit_start", "on_epoch_start", "on_step_end", "on_validation_end", "on_epoch_end",
         "on_fit_end")


class CallbackError(TrainguardError, RuntimeError):
    """A callback raised: the run stopped there, and the last checkpoint written before stays.

    Attributes:
        callback: the callback's name (its class name).
        hook: the hook that raised, e.g. ``"on_step_end"``.
    """

    def __init__(self, callback: str, hook: str, exc: BaseException) -> None:
        super().__init__(f"callback {callback}.{hook} raised {type(exc).__name__}: {exc}")
        self.callback, self.hook = callback, hook


class Callback:
    """Base class with every hook doing nothing; override the ones you need.

    Example::

        class LogLR(trainguard.Callback):
            def on_epoch_end(self, state, row):
                print(state.epoch, state.optimizer.param_groups[0]["lr"], row["val_loss"])

        trainguard.fit(..., callbacks=[LogLR()])
    """

    def on_fit_start(self, state: LoopView) -> None:
        """Before the first epoch (also after a resume)."""

    def on_epoch_start(self, state: LoopView) -> None:
        """Before the epoch's first batch (a resumed epoch starts again, mid-way)."""

    def on_step_end(self, state: LoopView, loss: torch.Tensor) -> None:
        """After each optimizer step. ``loss``: ``()`` tensor on the device, the step's loss
        (sample-weighted over its micro-batches), detached; reading it (``.item()``) waits for
        the device."""

    def on_validation_end(self, state: LoopView, metrics: dict[str, float]) -> None:
        """After validation: ``metrics`` holds ``train_loss`` and every ``val_*`` value."""

    def on_epoch_end(self, state: LoopView, row: dict[str, float]) -> None:
        """After the epoch: ``row`` is its ``metrics.csv`` row (``epoch`` 1-based)."""

    def on_fit_end(self, state: LoopView) -> None:
        """After the last epoch, or after a requested stop (not after an error or a signal)."""


class EarlyStopping(Callback):
    """Stop when ``monitor`` has not improved for ``patience`` epochs.

    Args:
        monitor: a ``metrics.csv`` column, e.g. ``"val_loss"`` or ``"val_accuracy"``.
        patience: epochs without improvement before stopping (>= 1).
        min_delta: the least change that counts as an improvement (>= 0, in the metric's unit).
        mode: ``"min"``, ``"max"``, or ``"auto"`` (max for accuracy-like names, else min).

    A NaN value never counts as an improvement. The run ends after the epoch that exhausted the
    patience, with its checkpoint written; ``summary.json`` records ``stopped_early`` and
    ``stopped_epoch``, and ``--resume`` of such a run does not train further.

    Raises:
        UsageError: ``patience`` < 1, ``min_delta`` < 0, an unknown ``mode``, or (at the first
            epoch's end) a ``monitor`` that is not among the epoch's metrics.

    Example::

        trainguard.fit(..., callbacks=[trainguard.EarlyStopping("val_loss", patience=5)])
    """

    def __init__(self, monitor: str = "val_loss", patience: int = 5, min_delta: float = 0.0,
                 mode: Literal["auto", "min", "max"] = "auto") -> None:
        if not isinstance(patience, int) or patience < 1:
            raise UsageError(f"EarlyStopping(patience=...) must be an int >= 1, got {patience!r}")
        if not min_delta >= 0:
            raise UsageError(f"EarlyStopping(min_delta=...) must be >= 0, got {min_delta!r}")
        if mode not in ("auto", "min", "max"):
            raise UsageError(f"EarlyStopping(mode=...) must be 'auto', 'min' or 'max', got "
                             f"{mode!r}")
        self.monitor, self.patience, self.min_delta = monitor, patience, float(min_delta)
        self.mode = mode if mode != "auto" else monitor_mode(monitor)
        self.best: float | None = None
        self.best_epoch: int | None = None
        self.wait = 0

    def on_epoch_end(self, state: LoopView, row: dict[str, float]) -> None:
        if self.monitor not in row:
            raise UsageError(f"EarlyStopping(monitor={self.monitor!r}): no such metric; this "
                             f"epoch's metrics are {sorted(row)}")
        value = float(row[self.monitor])
        if self._improved(value):
            self.best, self.best_epoch, self.wait = value, int(row["epoch"]), 0
            return
        self.wait += 1
        if self.wait >= self.patience:
            best = "none" if self.best is None else f"{self.best:.6g} at epoch {self.best_epoch}"
            state.request_stop(f"EarlyStopping: {self.monitor} did not improve by more than "
                               f"{self.min_delta:g} for {self.patience} epoch(s) (best {best})")

    def _improved(self, value: float) -> bool:
        if math.isnan(value):
            return False
        if self.best is None:
            return True
        if self.mode == "min":
            return value < self.best - self.min_delta
        return value > self.best + self.min_delta

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "best_epoch": self.best_epoch, "wait": self.wait}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best, self.best_epoch, self.wait = state["best"], state["best_epoch"], state["wait"]


def monitor_mode(name: str) -> Literal["min", "max"]:
    """``"max"`` for accuracy-like metric names, else ``"min"``."""
    return "max" if any(w in name for w in ("acc", "f1", "auc", "precision", "recall")) \
        else "min"


class Callbacks:
    """Calls each hook on every callback that defines it, in the order given; an exception
    becomes a :class:`CallbackError` naming the callback and the hook."""

    def __init__(self, callbacks: Sequence[Any]) -> None:
        self.callbacks = list(callbacks)
        self.names = _unique_names(self.callbacks)
        self._bound = {hook: [(name, getattr(cb, hook)) for cb, name
                              in zip(self.callbacks, self.names) if _defines(cb, hook)]
                       for hook in HOOKS}
        self.wants_step = bool(self._bound["on_step_end"])

    def __call__(self, hook: str, *args: Any) -> None:
        for name, fn in self._bound[hook]:
            try:
                fn(*args)
            except Exception as exc:
                raise CallbackError(name, hook, exc) from exc

    def state_dict(self) -> dict[str, Any]:
        return {name: cb.state_dict() for cb, name in zip(self.callbacks, self.names)
                if callable(getattr(cb, "state_dict", None))}

    def load_state_dict(self, states: dict[str, Any]) -> None:
        for cb, name in zip(self.callbacks, self.names):
            if name in states and callable(getattr(cb, "load_state_dict", None)):
                cb.load_state_dict(states[name])


def _defines(callback: Any, hook: str) -> bool:
    """The callback has its own ``hook`` (not :class:`Callback`'s no-op)."""
    fn = getattr(type(callback), hook, None) or getattr(callback, hook, None)
    return callable(fn) and fn is not getattr(Callback, hook)


def _unique_names(callbacks: list[Any]) -> list[str]:
    """Class names, numbered from the second of a kind on (``EarlyStopping``,
    ``EarlyStopping#2``): the keys of their states in a checkpoint."""
    seen: dict[str, int] = {}
    names = []
    for cb in callbacks:
        base = type(cb).__name__
        seen[base] = seen.get(base, 0) + 1
        names.append(base if seen[base] == 1 else f"{base}#{seen[base]}")
    return names


def check_callbacks(callbacks: Any) -> list[Any]:
    """``callbacks`` as a list, each defining at least one hook.

    Raises:
        UsageError: not a list, or an entry that defines no hook (e.g. a class not instantiated).
    """
    if callbacks is None:
        return []
    if not isinstance(callbacks, (list, tuple)):
        raise UsageError(f"fit(callbacks=...) must be a list of callbacks, got "
                         f"{type(callbacks).__name__}")
    for cb in callbacks:
        if isinstance(cb, type):
            raise UsageError(f"fit(callbacks=[{cb.__name__}]): pass an instance, "
                             f"{cb.__name__}(...), not the class")
        if not any(callable(getattr(cb, hook, None)) for hook in HOOKS):
            raise UsageError(f"fit(callbacks=[...]): {cb!r} defines none of the hooks "
                             f"{', '.join(HOOKS)}")
    return list(callbacks)
