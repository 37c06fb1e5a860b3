"""TG305 scheduler-before-optimizer: ``lr_scheduler.step()`` before the first ``optimizer.step()``.

What it watches: the first ``step()`` user code makes on each LR scheduler (later calls cost one set
look-up), and whether the scheduler's optimizer has stepped by then.

When it fires: the scheduler stepped while its optimizer never had, and no ``GradScaler`` skipped
that optimizer's step. The schedule then starts one value late: the first learning rate (often the
warm-up's smallest) is never used, and with a per-iteration ``scheduler.step()`` placed before
``optimizer.step()`` every step uses the next step's rate.

Silent on: the canonical order (``optimizer.step()`` then ``scheduler.step()``), OneCycle/Cyclic/
warm-up schedulers stepped per batch (per-batch stepping is their design; only the order is
checked), and the first steps of an AMP run whose ``GradScaler`` skipped ``optimizer.step()``
because of inf/NaN gradients (PyTorch's own warning misfires there): a live ``GradScaler`` whose
scale has backed off below its initial value, or that has stepped this optimizer, means a skip.

Not checked: a per-epoch scheduler (``StepLR``) stepped per batch; a step count alone cannot tell
it from a schedule written in iterations.

Reference: ``torch.optim`` "How to adjust learning rate" (call ``scheduler.step()`` after
``optimizer.step()``) https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate; GitHub
issues https://github.com/gjy3035/C-3-Framework/issues/96 and, for the GradScaler false alarm,
https://github.com/kekmodel/MPL-pytorch/issues/38.
"""

from __future__ import annotations

import weakref
from typing import Any

from trainguard.sanitize.checks import Check


class SchedulerBeforeOptimizer(Check):
    code = "TG305"

    def __init__(self, watcher: Any) -> None:
        super().__init__(watcher)
        self.checked: "weakref.WeakSet[Any]" = weakref.WeakSet()

    def on_scheduler_step(self, scheduler: Any) -> None:
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
