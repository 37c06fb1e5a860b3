"""TG305 scheduler-before-optimizer: ``lr_scheduler.step()`` before the first ``optimizer.step()``,
or a per-epoch scheduler stepped per batch.

What it watches: the ``step()`` calls user code makes on LR schedulers (the first one on each
scheduler, then those of the checked steps), whether the scheduler's optimizer has stepped by then,
and each pass over a DataLoader (``DataLoader.__iter__``) with its length.

When it fires:
- the scheduler stepped while its optimizer never had, and no ``GradScaler`` skipped that
  optimizer's step. The schedule then starts one value late: the first learning rate (often the
  warm-up's smallest) is never used, and with a per-iteration ``scheduler.step()`` placed before
  ``optimizer.step()`` every step uses the next step's rate;
- a ``StepLR``, ``MultiStepLR`` or ``ExponentialLR`` (schedules written in epochs: "divide by 10
  every 30 epochs") is stepped per batch, and its decay period is shorter than one pass over the
  data, so the learning rate is cut several times per epoch and soon reaches nothing. Per batch:
  two of its steps fall within one pass over a DataLoader of ``L`` >= 2 batches (a pass that has
  not yet seen more than ``L`` optimizer steps), with at least one scheduler step per two
  optimizer steps between them (an "epoch" of a few batches drawn from one long pass steps far
  less often). The period: ``step_size``, the first milestone, or for ``ExponentialLR`` the steps
  it takes to halve the rate (``log(0.5) / log(gamma)``); it must be under ``L`` and at most 1000
  steps. Without a running DataLoader pass (batches sliced by hand), the scheduler must have
  stepped at every optimizer step since it was first seen (8 steps at least) and the learning
  rate must have fallen below a millionth of its initial value. Reported at the scheduler's
  ``step()`` line, once per scheduler.

Silent on: the canonical order (``optimizer.step()`` then ``scheduler.step()``), OneCycle/Cyclic/
warm-up schedulers stepped per batch (per-batch stepping is their design; only the order is
checked), and the first steps of an AMP run whose ``GradScaler`` skipped ``optimizer.step()``
because of inf/NaN gradients (PyTorch's own warning misfires there): a live ``GradScaler`` whose
scale has backed off below its initial value, or that has stepped this optimizer, means a skip.

Silent on schedules written in iterations and stepped per batch: a period of at least one pass
(``step_size=30 * len(loader)``, milestones in the thousands on a small dataset, ``ExponentialLR``
with a gamma near 1), ``CosineAnnealingLR``, ``LambdaLR`` and ``LinearLR`` warm-ups (torchvision's
detection reference steps a warm-up per iteration in the first epoch, then a ``MultiStepLR`` per
epoch), and a DataLoader of a single batch (per batch is then per epoch). A schedule that is
itself in iterations yet decays faster than once per pass over the data (a period under ``len(loader)``)
is reported: it is indistinguishable from the mistake.

Reference: ``torch.optim`` "How to adjust learning rate" (call ``scheduler.step()`` after
``optimizer.step()``) https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate; GitHub
issues https://github.com/gjy3035/C-3-Framework/issues/96 and, for the GradScaler false alarm,
https://github.com/kekmodel/MPL-pytorch/issues/38; per-batch stepping: "Scheduler should step after
the end of each epoch, not after every iteration" (https://github.com/pytorch/pytorch/issues/3814),
https://github.com/ivadomed/ivadomed/pull/55 and https://github.com/pytorch/tutorials/pull/640.
"""

from __future__ import annotations

import math
import weakref
from typing import Any

from trainguard.sanitize.checks import Check


class SchedulerBeforeOptimizer(Check):
    code = "TG305"

    def __init__(self, watcher: Any) -> None:
        super().__init__(watcher)
        self.checked: "weakref.WeakSet[Any]" = weakref.WeakSet()
        from torch.optim import lr_scheduler as lrs

        self.epoch_types = (lrs.StepLR, lrs.MultiStepLR, lrs.ExponentialLR)
        self.passes = 0  # DataLoader passes started
        self.pass_len: int | None = None  # len() of the DataLoader of the latest pass
        self.pass_start = 0  # optimizer steps completed when it started
        # epoch schedulers -> (pass number, last_epoch, optimizer steps completed) at their
        # latest step seen, and (last_epoch, optimizer steps completed) at the first
        self.latest: "weakref.WeakKeyDictionary[Any, tuple[int, int, int]]" = \
            weakref.WeakKeyDictionary()
        self.first: "weakref.WeakKeyDictionary[Any, tuple[int, int]]" = \
            weakref.WeakKeyDictionary()
        self.reported: "weakref.WeakSet[Any]" = weakref.WeakSet()

    def on_loader_iter(self, loader: Any) -> None:
        self.passes += 1
        self.pass_start = self.state.step
        try:
            self.pass_len = len(loader)
        except TypeError:  # an IterableDataset without __len__
            self.pass_len = None

    def on_scheduler_step(self, scheduler: Any) -> None:
        if isinstance(scheduler, self.epoch_types) and scheduler not in self.reported:
            self._per_batch(scheduler)
        if scheduler in self.checked:
            return
        self.checked.add(scheduler)
        optimizer = getattr(scheduler, "optimizer", None)
        if optimizer is None or optimizer in self.state.optimizers:
            return  # it has stepped: the order is right
        if _scaler_skipped(optimizer):
            return
        lrs = [g.get("lr") for g in optimizer.param_groups]
        self.report(
            f"{type(scheduler).__name__}.step() ran before the first "
            f"{type(optimizer).__name__}.step() (learning rate now {lrs[0]:.3g}): the schedule's "
            "first value is skipped, and when the two are called every iteration in this order "
            "each step uses the next step's learning rate",
            fix="call optimizer.step() first and scheduler.step() after it (per batch for "
                "OneCycle/Cyclic/warm-up, per epoch for StepLR/MultiStepLR/CosineAnnealingLR)")

    def _per_batch(self, scheduler: Any) -> None:
        """Report an epoch schedule stepped per batch (before this ``step()`` runs)."""
        period = _period(scheduler)
        if period is None or period > _MAX_PERIOD:
            return
        steps, done = int(getattr(scheduler, "last_epoch", 0)), self.state.step
        first = self.first.setdefault(scheduler, (steps, done))
        earlier = self.latest.get(scheduler)
        length = self.pass_len
        # the latest DataLoader pass may still be running: it has not made more batches than it has
        running = length is not None and done - self.pass_start <= length
        self.latest[scheduler] = (self.passes, steps, done)
        lrs = [float(g["lr"]) for g in scheduler.optimizer.param_groups]
        initial = [float(b) for b in getattr(scheduler, "base_lrs", [])]
        if running:
            # per batch: it stepped since, at least once per two optimizer steps (a GAN's two
            # optimizers); an "epoch" of a few batches drawn from a long pass steps far less often
            if (earlier is None or earlier[0] != self.passes or steps <= earlier[1]
                    or 2 * (steps - earlier[1]) < done - earlier[2]
                    or length is None or length < 2 or period >= length):
                return
            seen = (f"it stepped twice within one pass over a DataLoader of {length} batches, so "
                    f"{_pace(scheduler, 'batches')}: one epoch multiplies the rate by "
                    f"{_num(_factor(scheduler, length))} instead of at most {scheduler.gamma:g}")
        else:
            # batches sliced by hand (no DataLoader pass running): only a schedule stepped at every
            # optimizer step whose rate has collapsed tells the units apart
            calls, optimizer_steps = steps - first[0] + 1, done - first[1] + 1
            if (calls < max(_MIN_STEPS, optimizer_steps) or not lrs or not initial
                    or min(lr / b if b else 1.0 for lr, b in zip(lrs, initial)) >= _COLLAPSED):
                return
            seen = (f"it has stepped at every optimizer step ({calls} times), so "
                    f"{_pace(scheduler, 'steps')}")
        self.reported.add(scheduler)
        start = f" (initial {initial[0]:.3g})" if initial else ""
        self.report(
            f"{_describe(scheduler)} is a per-epoch schedule stepped per batch: {seen}; the "
            f"learning rate is now {lrs[0]:.3g}{start}",
            fix="call scheduler.step() once per epoch, after the batch loop; for a schedule in "
                "iterations, give its period in batches (step_size=30 * len(loader), milestones "
                "times len(loader))")


_MAX_PERIOD = 1000  # a longer period is a schedule in iterations
_MIN_STEPS = 8  # scheduler steps before a collapse without a DataLoader counts
_COLLAPSED = 1e-6  # learning rate / initial learning rate below which a schedule has collapsed


def _period(scheduler: Any) -> float | None:
    """Steps until the schedule first cuts the rate (``ExponentialLR``: until it has halved)."""
    from torch.optim import lr_scheduler as lrs

    if isinstance(scheduler, lrs.StepLR):
        return float(scheduler.step_size)
    if isinstance(scheduler, lrs.MultiStepLR):
        return float(min(scheduler.milestones)) if scheduler.milestones else None
    gamma = float(getattr(scheduler, "gamma", 1.0))
    if not 0.0 < gamma < 1.0:
        return None
    return math.log(0.5) / math.log(gamma)


def _pace(scheduler: Any, unit: str) -> str:
    """What the schedule does per ``unit`` ("batches" or "steps"), against per epoch."""
    from torch.optim import lr_scheduler as lrs

    if isinstance(scheduler, lrs.StepLR):
        return (f"the rate is multiplied by {scheduler.gamma:g} {_every(scheduler.step_size, unit)} "
                f"instead of {_every(scheduler.step_size, 'epochs')}")
    if isinstance(scheduler, lrs.MultiStepLR):
        marks = ", ".join(str(m) for m in sorted(scheduler.milestones))
        return f"its milestones fall after {marks} {unit} instead of epochs"
    half = float(_num(_period(scheduler) or 0.0))
    if half == 1:
        return f"the rate is halved {_every(1, unit)} instead of {_every(1, 'epochs')}"
    return (f"the rate is multiplied by {scheduler.gamma:g} {_every(1, unit)} and halves "
            f"{_every(half, unit)} instead of {_every(half, 'epochs')}")


def _factor(scheduler: Any, steps: int) -> float:
    """What ``steps`` steps from the start multiply the rate by."""
    from torch.optim import lr_scheduler as lrs

    gamma = float(scheduler.gamma)
    if isinstance(scheduler, lrs.StepLR):
        return gamma ** (steps // scheduler.step_size)
    if isinstance(scheduler, lrs.MultiStepLR):
        return gamma ** sum(n for m, n in scheduler.milestones.items() if m <= steps)
    return gamma ** steps


def _every(n: float, unit: str) -> str:
    """``every 3 batches``, ``every batch``."""
    return f"every {_SINGULAR[unit]}" if n == 1 else f"every {n:g} {unit}"


_SINGULAR = {"batches": "batch", "steps": "step", "epochs": "epoch"}


def _describe(scheduler: Any) -> str:
    from torch.optim import lr_scheduler as lrs

    name = type(scheduler).__name__
    if isinstance(scheduler, lrs.StepLR):
        return f"{name}(step_size={scheduler.step_size}, gamma={scheduler.gamma:g})"
    if isinstance(scheduler, lrs.MultiStepLR):
        return f"{name}(milestones={sorted(scheduler.milestones)}, gamma={scheduler.gamma:g})"
    return f"{name}(gamma={scheduler.gamma:g})"


def _num(x: float) -> str:
    return f"{x:.3g}"


def _scaler_skipped(optimizer: Any) -> bool:
    """A live, enabled ``GradScaler`` that has skipped (or stepped) ``optimizer``."""
    import gc

    try:
        from torch.amp import GradScaler
    except ImportError:  # very old torch
        return False
    for obj in gc.get_objects():
        if GradScaler not in type(obj).__mro__ or not obj.is_enabled():
            continue
        if getattr(obj, "_scale", None) is None:
            continue  # never used
        state = obj._per_optimizer_states.get(id(optimizer))
        if state and getattr(state.get("stage"), "name", "") == "STEPPED":
            return True
        if obj.get_scale() < obj._init_scale:  # it backed off: a step was skipped
            return True
    return False
