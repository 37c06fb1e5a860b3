"""TG303 step-missing: backward runs again and again but the optimizer never steps.

What it watches: ``zero_grad()`` calls of optimizers that have not stepped yet (an optimizer that
has stepped once is dropped at once, so a working loop pays one set look-up per ``zero_grad``). For
each, up to eight of its trainable parameters: whether a backward since the previous
``zero_grad`` gave them a gradient, and their version counters (every in-place update bumps them).

When it fires: two full cycles of ``zero_grad`` -> backward reaching the optimizer's parameters ->
``zero_grad`` again, while ``optimizer.step()`` was never called and the parameters never changed.
Reported at the last backward's line; the counts in the message are brought up to date when the
run ends (or when the optimizer finally steps), so the final report gives the whole run's.

Silent on: optimizers that step (also after a few steps skipped by a ``GradScaler``: gradients with
inf/NaN do not count as a cycle), manual SGD (``p -= lr * p.grad`` changes the version counter),
gradient accumulation (zeroed at the step), saliency maps and attacks that call backward without
an optimizer or zero with ``model.zero_grad()``, backward passes that do not reach this optimizer's
parameters (another model's).

Reference: ``torch.optim`` "Taking an optimization step"
(https://pytorch.org/docs/stable/optim.html#taking-an-optimization-step).
"""

from __future__ import annotations

import weakref
from typing import Any

from trainguard.sanitize.checks import Check

_SAMPLE = 8
_CYCLES = 2


class _Followed:
    __slots__ = ("params", "versions", "start", "backwards", "cycles", "optimizer", "finding",
                 "shapes")

    def __init__(self, optimizer: Any, params: list[Any], backwards: int) -> None:
        self.optimizer = weakref.ref(optimizer)
        self.params = [weakref.ref(p) for p in params]
        self.versions = [p._version for p in params]
        self.start = backwards  # backward calls completed when it was first zeroed
        self.backwards = backwards  # ... when it was last zeroed after a backward
        self.cycles = 0  # zero_grad calls that cleared gradients a backward had filled
        self.finding: Any = None  # the finding, once reported (its message is kept up to date)
        self.shapes = ""


class StepMissing(Check):
    code = "TG303"

    def __init__(self, watcher: Any) -> None:
        super().__init__(watcher)
        self.followed: "weakref.WeakKeyDictionary[Any, _Followed]" = weakref.WeakKeyDictionary()
        self.done: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self.reported: list[tuple[_Followed, str]] = []  # with the optimizer's class name

    def on_zero_grad(self, owner: Any, set_to_none: bool) -> None:
        if not hasattr(owner, "param_groups") or owner in self.done:
            return
        if owner in self.state.optimizers:  # it has stepped: nothing to watch any more
            self.done.add(owner)
            followed = self.followed.pop(owner, None)
            if followed is not None and followed.finding is not None:
                self._final_message(followed, type(owner).__name__, stepped=True)
            return
        followed = self.followed.get(owner)
        count = self.state.backward_count
        if followed is None:
            params = [p for g in owner.param_groups for p in g["params"] if p.requires_grad]
            if params:
                self.followed[owner] = _Followed(owner, params[:_SAMPLE], count)
            return
        if count == followed.backwards:
            return
        if followed.finding is not None:  # reported already: only keep the counts
            followed.backwards = count
            followed.cycles += 1
            return
        self._cycle(owner, followed)

    def on_exit(self) -> None:
        for followed, name in self.reported:
            if followed.finding is None:
                continue
            optimizer = followed.optimizer()
            stepped = optimizer is not None and optimizer in self.state.optimizers
            if not stepped:
                followed.backwards = self.state.backward_count
            self._final_message(followed, name, stepped=stepped)

    def _cycle(self, optimizer: Any, followed: _Followed) -> None:
        import torch

        followed.backwards = self.state.backward_count
        params = [r() for r in followed.params]
        if any(p is None for p in params):
            self.done.add(optimizer)
            return
        if any(p._version != v for p, v in zip(params, followed.versions)):
            self.done.add(optimizer)  # the parameters are updated some other way (manual SGD)
            return
        grads = [p.grad for p in params if p.grad is not None]
        if not grads:
            return  # that backward did not reach this optimizer's parameters
        # note: a CUDA sync, only while this optimizer has never stepped
        if not all(bool(torch.isfinite(g).all()) for g in grads):
            return  # a GradScaler skips steps whose gradients overflowed
        followed.cycles += 1
        if followed.cycles < _CYCLES:
            return
        last = self.state.backwards[-1].where if self.state.backwards else None
        followed.shapes = ", ".join(str(tuple(p.shape)) for p in params[:3])
        name = type(optimizer).__name__
        followed.finding = self.report(
            _message(followed, name, stepped=False),
            fix="call optimizer.step() after loss.backward() in every training step",
            where=last)
        if followed.finding is None:  # suppressed or not selected
            self.done.add(optimizer)
            return
        self.reported.append((followed, name))

    def _final_message(self, followed: _Followed, name: str, *, stepped: bool) -> None:
        """Give the finding the counts as they stand now (it was printed with the first ones)."""
        followed.finding.message = _message(followed, name, stepped=stepped)
        followed.finding = None


def _message(followed: _Followed, name: str, *, stepped: bool) -> str:
    backwards = followed.backwards - followed.start
    cycles = followed.cycles
    if stepped:
        tail = (f"before {name}.step() was first called: the gradients of those "
                f"{cycles} step{'s' if cycles != 1 else ''} were thrown away")
    else:
        tail = f"and {name}.step() was never called: the parameters have not changed"
    return (f"{backwards} backward call{'s' if backwards != 1 else ''} filled the gradients of "
            f"{name}'s parameters (shapes {followed.shapes}) and zero_grad() cleared them "
            f"{cycles} time{'s' if cycles != 1 else ''}, {tail}")
