"""Where a run stands (:class:`LoopState`) and the read-only view callbacks get of it."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from trainguard.loop.history import History

__all__ = ["LoopState", "LoopView"]


@dataclass
class LoopState:
    """The counters a checkpoint saves and a resume restores.

    Attributes:
        epoch: 0-based epoch in progress (``epochs`` once the run is done).
        step: optimizer steps completed in the whole run.
        batches_done: batches of the current epoch already trained on.
        loss_sum: ``()`` device tensor, the sample-weighted sum of this epoch's training losses.
        samples: samples trained on in this epoch.
        epoch_start_lr: the learning rate of the first parameter group when the epoch started.
        epoch_elapsed_s: seconds this epoch ran before the last resume (0 without one).
        history: the finished epochs' metrics.
        stop_reason: why a callback asked to stop, or ``None``.
        stopped_epoch: 1-based epoch the run stopped in at a callback's request, or ``None``.
    """

    loss_sum: torch.Tensor
    epoch: int = 0
    step: int = 0
    batches_done: int = 0
    samples: int = 0
    epoch_start_lr: float = 0.0
    epoch_elapsed_s: float = 0.0
    history: History = field(default_factory=History)
    stop_reason: str | None = None
    stopped_epoch: int | None = None

    def start_epoch(self, lr: float) -> None:
        """Reset the epoch's sums (not on a mid-epoch resume, which restored them)."""
        if self.batches_done == 0:
            self.loss_sum.zero_()
            self.samples = 0
            self.epoch_start_lr = lr
            self.epoch_elapsed_s = 0.0

    def end_epoch(self) -> None:
        self.epoch += 1
        self.batches_done = 0
        self.epoch_elapsed_s = 0.0
        self.loss_sum.zero_()
        self.samples = 0


class LoopView:
    """What a callback sees of the loop: counters are read-only; the model and optimizer are the
    real objects (a callback may change the learning rate), the history is a copy.

    Attributes:
        epoch: 0-based epoch in progress (``metrics.csv``'s ``epoch`` column is ``epoch + 1``).
        epochs: epochs in the whole run.
        step: optimizer steps completed in the whole run.
        model: the module being trained, without its DDP or ``torch.compile`` wrapper.
        optimizer: the optimizer.
        history: a copy of the finished epochs' metrics (:class:`History`).
        rank, world_size: the process's place under ``torchrun`` (0 and 1 otherwise).
        run_dir: the run directory, or ``None``.
        stop_requested: a callback asked to stop (:meth:`request_stop`).
    """

    __slots__ = ("_state", "_model", "_optimizer", "_epochs", "_rank", "_world", "_run_dir")

    def __init__(self, state: LoopState, *, model: nn.Module, optimizer: torch.optim.Optimizer,
                 epochs: int, rank: int, world_size: int, run_dir: Path | None) -> None:
        self._state, self._model, self._optimizer = state, model, optimizer
        self._epochs, self._rank, self._world, self._run_dir = epochs, rank, world_size, run_dir

    epoch = property(lambda self: self._state.epoch)
    epochs = property(lambda self: self._epochs)
    step = property(lambda self: self._state.step)
    model = property(lambda self: self._model)
    optimizer = property(lambda self: self._optimizer)
    rank = property(lambda self: self._rank)
    world_size = property(lambda self: self._world)
    run_dir = property(lambda self: self._run_dir)
    stop_requested = property(lambda self: self._state.stop_reason is not None)

    @property
    def history(self) -> History:
        return copy.deepcopy(self._state.history)

    def request_stop(self, reason: str) -> None:
        """Stop the run after the current optimizer step (or at the end of this epoch, when asked
        from an epoch or validation hook): a checkpoint is written, ``summary.json`` says
        ``stopped_early`` with ``reason``, and ``fit`` returns normally. Under ``torchrun`` a stop
        asked on any rank stops every rank after the same step."""
        if self._state.stop_reason is None:
            self._state.stop_reason = str(reason)

    def __repr__(self) -> str:
        return f"LoopView(epoch={self.epoch}, step={self.step}, epochs={self.epochs})"

    def __setattr__(self, name: str, value: Any) -> None:
        if name in LoopView.__slots__ and not hasattr(self, name):
            object.__setattr__(self, name, value)  # set once, in __init__
            return
        raise AttributeError(f"LoopView.{name} is read-only: the loop owns its counters; ask "
                             "to stop with state.request_stop(reason)")
