"""Where a scheduler stepped before its optimizer's first step is reported (TG305).

The line to change is the one whose order against ``optimizer.step()`` is wrong. When both calls
sit in one function, that is the ``scheduler.step()`` line. When each is made by a helper (a
trainer class's ``update_learning_rate()`` stepping its schedulers and ``optimize_parameters()``
stepping its optimizer, called in that order from the training loop), the helper's own line is
right in itself: the loop calls the two helpers in the wrong order. The place follows from two
stacks: the user's stack at the scheduler's ``step()`` and the one at the optimizer's first
``step()``. The line of the first in the deepest frame both share is where the order is set
(``core/callstack.py``, :func:`cause_line`; a line dispatching a hook to each callback, there or
in a helper that frame calls, gives way to the callback's own). The finding therefore waits for
the optimizer's first step; one that never comes is reported at exit, at the ``scheduler.step()``
line.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from trainguard.sanitize.core.callstack import Stack, cause_line, user_stack
from trainguard.sanitize.core.frames import Location, short_location

__all__ = ["Early", "EarlySteps", "order_finding"]


class Early:
    """A scheduler's ``step()`` seen before its optimizer's first: what to report once the
    optimizer steps (or the run ends)."""

    __slots__ = ("scheduler", "optimizer", "name", "optimizer_name", "lr", "stack", "where")

    def __init__(self, scheduler: Any, optimizer: Any, lr: Any, stack: Stack,
                 where: Location | None) -> None:
        self.scheduler, self.optimizer = weakref.ref(scheduler), weakref.ref(optimizer)
        self.name = type(scheduler).__name__
        self.optimizer_name = type(optimizer).__name__
        self.lr = lr
        self.stack = stack  # the user's stack at the scheduler's step()
        self.where = where  # the scheduler's step() line


class EarlySteps:
    """What TG305's check does with a scheduler stepped before its optimizer: note it, and report
    it at the optimizer's first step (an ``on_demand`` event, listened to while one waits) or at
    exit. Mixed into a :class:`~trainguard.sanitize.core.check.Check` that sets ``order``
    (scheduler -> its finding and the line reported)."""

    early: "weakref.WeakKeyDictionary[Any, Early]"
    order: "weakref.WeakKeyDictionary[Any, Any]"

    def note_early(self, scheduler: Any, optimizer: Any) -> None:
        """``scheduler.step()`` ran, ``optimizer`` never stepped: wait for its first step."""
        lrs = [g.get("lr") for g in optimizer.param_groups]
        stack = user_stack(sys._getframe(2))
        where = stack[-1][2] if stack else None
        self.early[scheduler] = Early(scheduler, optimizer, lrs[0] if lrs else None, stack, where)
        self.arm()  # type: ignore[attr-defined]

    def on_step_pre(self, optimizer: Any) -> None:
        for scheduler, early in list(self.early.items()):
            if early.optimizer() is optimizer:
                del self.early[scheduler]
                self._order(scheduler, early, sys._getframe(1))
        if not self.early:
            self.disarm()  # type: ignore[attr-defined]

    def early_left(self) -> None:
        """At exit: report the schedulers whose optimizer never stepped."""
        for scheduler, early in list(self.early.items()):
            self._order(scheduler, early, None)
        self.early.clear()

    def _order(self, scheduler: Any, early: Early, frame: Any) -> None:
        where, message, fix = order_finding(early, frame)
        finding = self.report(message, fix=fix, where=where)  # type: ignore[attr-defined]
        if finding is not None and where is not None:
            self.order[scheduler] = (finding, where)


def order_finding(early: Early, step_frame: Any) -> tuple[Location | None, str, str]:
    """``(where, message, fix)`` for ``early``, given the frame of the optimizer's first
    ``step()`` (None: it never stepped)."""
    where = early.where
    if step_frame is not None and early.stack:
        where = cause_line(early.stack, user_stack(step_frame), past_dispatch=True,
                           dispatch_below=True) or where
    lr = f" (learning rate now {early.lr:.3g})" if isinstance(early.lr, (int, float)) else ""
    at = "" if where == early.where or early.where is None else \
        f" (its step() at {short_location(early.where)})"
    message = (f"{early.name}.step(){at} ran before the first {early.optimizer_name}.step()"
               f"{lr}: the schedule's first value is skipped, and when the two are called every "
               "iteration in this order each step uses the next step's learning rate")
    fix = ("call optimizer.step() first and scheduler.step() after it (per batch for "
           "OneCycle/Cyclic/warm-up, per epoch for StepLR/MultiStepLR/CosineAnnealingLR)")
    return where, message, fix
