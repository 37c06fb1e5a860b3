"""TG302 zero-grad-before-step: gradients were zeroed between ``backward()`` and ``step()``.

What it watches: ``Optimizer.zero_grad``/``Module.zero_grad`` calls made after a backward and before
the next optimizer step (a cheap comparison of two counters; zeroing at the start or at the end of
the step never gets past it), and the next ``optimizer.step()``.

When it fires: ``optimizer.step()`` runs with no backward since that ``zero_grad``, the zeroed
parameters belong to this optimizer, and the gradients of (up to eight of) them are now ``None`` or
all zero: the step applies nothing (SGD) or only momentum/weight decay (Adam). Reported at the step
line, naming the ``zero_grad`` line.

Silent on: ``zero_grad`` before backward or after step, ``p.grad = None``, LBFGS closures (they zero
inside ``step``), GANs whose other optimizer is zeroed in between (its parameters are not this
optimizer's), gradients set by hand after zeroing (they are not zero), declared accumulation,
zeroing a part of the model on purpose (``model.embedding.zero_grad()`` to keep a layer frozen:
the optimizer's other parameters still hold their gradients).

Cost: per checked ``zero_grad``, two counters; at the next step, only after a ``zero_grad`` between
backward and step, 8 gradients read at most (skipped on devices whose values are not read:
``values.py``).

Reference: ``torch.optim.Optimizer.zero_grad``
(https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html) and the
"Optimizing Model Parameters" tutorial's step order
(https://pytorch.org/tutorials/beginner/basics/optimization_tutorial.html).
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.frames import short_location, user_location
from trainguard.sanitize.core.values import readable

_SAMPLE = 8


def _params(owner: Any) -> list[Any]:
    if hasattr(owner, "param_groups"):
        return [p for g in owner.param_groups for p in g["params"]]
    return list(owner.parameters())


class ZeroGradBeforeStep(Check):
    code = "TG302"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        # (weakref(owner), backward count at the zero_grad, its location, set_to_none)
        self.pending: tuple | None = None

    def on_zero_grad(self, owner: Any, set_to_none: bool) -> None:
        state = self.state
        # state.backwards_at_step is kept on settled steps too, so a zero_grad that breaks a
        # settled loop is judged like any other
        if state.in_step or state.backward_count <= state.backwards_at_step:
            return  # zeroing before the backward or after the step: the usual, correct places
        self.pending = (weakref.ref(owner), state.backward_count,
                        user_location(sys._getframe(1)), set_to_none)

    def on_step_pre(self, optimizer: Any) -> None:
        pending = self.pending
        if pending is None or pending[1] != self.state.backward_count:
            return
        owner = pending[0]()
        if owner is None:
            return
        zeroed = {id(p) for p in _params(owner)}
        mine = [p for p in _params(optimizer) if id(p) in zeroed and p.requires_grad][:_SAMPLE]
        if not mine:
            return  # another optimizer's (or model's) gradients were zeroed: a GAN's pattern
        grads = [p.grad for p in mine if p.grad is not None]
        if not readable(*grads):
            return  # values that cannot be read (meta): nothing is known
        # note: a sync on CUDA, paid only on this already-suspicious path
        if any(bool(g.any()) for g in grads):
            return  # gradients were set again (by hand or torch.autograd.grad) after zeroing
        rest = [p.grad for p in _params(optimizer)
                if id(p) not in zeroed and p.grad is not None][:_SAMPLE]
        if not readable(*rest) or any(bool(g.any()) for g in rest):
            return  # a part zeroed on purpose (a frozen layer): the step still applies the rest
        where = pending[2]
        at = short_location(user_location(sys._getframe(1)), "the step")
        owner_name = type(owner).__name__
        how = "set them to None, so step() skips every parameter" if pending[3] else \
            "filled them with zeros, so step() moves the parameters by momentum and weight decay only"
        self.report(
            f"{type(optimizer).__name__}.step() at optimizer step {self.state.step + 1} ran on "
            f"zeroed gradients: {owner_name}.zero_grad() here came after the last backward and "
            f"{how}; nothing learns from this batch (step at {at})",
            fix="call zero_grad() before loss.backward() (or after optimizer.step()), never between "
                "the two",
            where=where)
        self.pending = None

    def on_step(self, optimizer: Any) -> None:
        self.pending = None

    def on_resume(self, boundary: bool) -> None:
        self.pending = None  # a zero_grad noted before settled steps is no longer pending
