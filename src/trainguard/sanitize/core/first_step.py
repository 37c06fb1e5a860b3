"""Gradients a backward left before the training loop, still there at an optimizer's first step.

TG301 follows gradients from one ``optimizer.step()`` to the next, so the first step has no
previous one to compare with. A backward run once before the loop (a sanity check that gradients
reach every layer, a gradient-norm probe, a learning-rate finder's last trial) leaves gradients;
when the loop zeroes only after ``step()`` (nanoGPT's order, ``zero_grad(set_to_none=True)`` to
free memory during the forward), nothing clears them before the first step, which then applies
that backward's gradients plus the first batch's.

Until an optimizer's first step (and for its first 64 backward calls at most), each backward's end
looks at the first parameter of that optimizer that has a gradient: the first backward that made
the gradient tensor is its origin (the tensor, its version counter, the user's stack); the next
backward that added onto the same tensor, its version advanced by exactly that accumulation and no
``zero_grad`` of that parameter in between, accumulated. At the first step the accumulation is a
leftover when, in the deepest frame the origin's stack and the step's stack share, a loop holds the
step's line but not the line that led to the origin backward: that backward ran before the loop
that steps, once. Accumulation inside the loop (micro-batches, a GAN's discriminator backward
through the generator, SAM's two passes with a zeroing between them) is not a leftover.

Judged at the optimizer's second step: the leftover counts only when that step's gradients were
zeroed after the first (the loop does zero, just after ``step()``); a loop that never zeroes is
TG301's ordinary finding.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from trainguard.sanitize.core.callstack import shared_depth, user_stack
from trainguard.sanitize.core.params import zeroed_by
from trainguard.sanitize.core.train_once import loop_apart

_FRESH = 8  # optimizers followed until their first step
_BACKWARDS = 64  # backward calls looked at per optimizer before its first step


class _Origin:
    __slots__ = ("param", "grad", "version", "stack", "added", "seen")

    def __init__(self) -> None:
        self.param: Any = None  # weakref to the parameter looked at
        self.grad: Any = None  # weakref to its gradient as the origin backward made it
        self.version = -1
        self.stack: Any = ()  # the user's stack of the origin backward
        self.added = False  # a later backward added onto it, unzeroed
        self.seen = 0  # backward calls looked at


class FirstStep:
    """Leftover gradients at an optimizer's first step (see the module docstring)."""

    FIX = ("call optimizer.zero_grad() after this call, before the training loop (or at the top "
           "of each step); a check that must not touch training leaves no gradients behind")

    def __init__(self) -> None:
        self.fresh: "weakref.WeakKeyDictionary[Any, _Origin]" = weakref.WeakKeyDictionary()
        # optimizer -> (the location to report, the loop's line) awaiting its second step
        self.pending: "weakref.WeakKeyDictionary[Any, tuple[Any, int]]" = \
            weakref.WeakKeyDictionary()

    def built(self, obj: Any) -> None:
        if hasattr(obj, "param_groups") and len(self.fresh) < _FRESH:
            self.fresh[obj] = _Origin()

    def backward_done(self, frame: Any) -> None:
        """A backward ended (``frame``: the probe's frame, below the user's call)."""
        if not self.fresh:
            return
        for optimizer, origin in list(self.fresh.items()):
            origin.seen += 1
            if origin.seen > _BACKWARDS:
                continue
            param = origin.param() if origin.param is not None else None
            if param is None:
                param = next((p for g in optimizer.param_groups for p in g["params"]
                              if p.grad is not None), None)
                if param is None:
                    continue
                origin.param = weakref.ref(param)
            grad = param.grad
            if grad is None:
                continue
            if origin.added:
                continue
            if origin.grad is not None and origin.grad() is grad and \
                    grad._version == origin.version + 1:
                origin.added = True  # exactly this backward's accumulation since the origin
            else:  # a new tensor, or one changed in between (``p.grad.zero_()``): a new origin
                origin.grad, origin.version = weakref.ref(grad), grad._version
                origin.stack = user_stack(frame)

    def zeroed(self, owner: Any) -> None:
        """``owner.zero_grad()``: an origin whose parameter it clears starts over."""
        if not self.fresh:
            return
        ids = {id(p) for p in zeroed_by(owner)}
        for origin in self.fresh.values():
            if origin.param is not None and id(origin.param()) in ids:
                origin.grad, origin.added = None, False

    def first_step(self, optimizer: Any) -> None:
        """The optimizer's first step is about to run: keep a leftover to judge at its second."""
        origin = self.fresh.pop(optimizer, None)
        if origin is None or not origin.added or not origin.stack:
            return
        param = origin.param()
        if param is None or param.grad is None or origin.grad() is not param.grad:
            return
        step_stack = user_stack(sys._getframe(2))
        depth = shared_depth(origin.stack, step_stack)
        if depth < 0 or depth >= len(step_stack) or depth >= len(origin.stack):
            return
        code, at = step_stack[depth][1], step_stack[depth][2]
        before = origin.stack[depth][2]
        loop = loop_apart(at[0], code, at[1], before[1])
        if loop is not None and before[1] < loop:
            self.pending[optimizer] = (before, loop)

    def judge(self, optimizer: Any, stale: bool) -> tuple[Any, str] | None:
        """Before each step of ``optimizer`` (``stale``: its gradients were not zeroed since its
        last step): note a leftover at its first step; return (where, message) at its second."""
        if optimizer in self.fresh:
            self.first_step(optimizer)
            return None
        found = self.second_step(optimizer, stale)
        return None if found is None else (found[0], self.message(optimizer, found[1]))

    @staticmethod
    def message(optimizer: Any, loop: int) -> str:
        return (f"this call runs a backward before the loop at line {loop} and leaves its "
                f"gradients; the loop zeroes them only after {type(optimizer).__name__}.step(), so "
                "the first step applied this backward's gradients added to the first batch's")

    def second_step(self, optimizer: Any, stale: bool) -> tuple[Any, int] | None:
        """The optimizer's second step is about to run (``stale``: its gradients were not zeroed
        since the first): the leftover to report, or None."""
        found = self.pending.pop(optimizer, None) if self.pending else None
        return None if stale else found
