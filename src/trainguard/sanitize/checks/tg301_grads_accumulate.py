"""TG301 grads-accumulate: an optimizer step used gradients left over from the previous step.

What it watches: after each ``optimizer.step()``, up to two of the optimizer's parameters that
have a gradient: the gradient tensor (weakly) and its version counter. A post-accumulate-grad hook
on those parameters (``Tensor.register_post_accumulate_grad_hook``) sees the first backward that
adds into each gradient after the step. The hooks are taken off while the loop is settled (its
steps are not judged, ``on_settle``) and put back when checking resumes.

When it fires: that first backward added onto the very tensor the previous step used, untouched
in between (the same object, its version advanced by exactly this accumulation): nothing zeroed it,
neither ``zero_grad()`` (which sets ``None`` or zeroes in place), ``p.grad = None`` nor
``p.grad.zero_()``. The finding is judged at the next ``optimizer.step()`` of that optimizer,
unless the gradients were zeroed after that backward (a GAN's generator gradients polluted by the
discriminator's backward, then zeroed before the generator's step), and reported at the cause: the
line of the backward that added onto the stale gradients (of the last 8 backward calls; else at
the step line), naming the step.

Silent on: ``zero_grad`` before backward or at the end of the step, ``set_to_none`` either way,
``p.grad = None``, ``model.zero_grad()``, LBFGS closures (they zero inside ``step``), manual SGD
without an optimizer, several optimizers, and gradient accumulation over micro-batches (zeroed after
each step). Declared accumulation across steps is silenced with ``# trainguard: ignore[TG301]`` on
the backward line or on the step line.

Cost: per checked optimizer step, 2 parameters per optimizer followed (hooks taken off while the
loop is settled); per ``zero_grad``, a set of the owner's parameter ids.

Reference: ``torch.optim.Optimizer.zero_grad`` docs
(https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html); "Why do we need to
call zero_grad() in PyTorch?" (https://flisks.com/python-why-do-we-need-to-call-zero-grad-in-pytorch).
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.frames import short_location, user_location
from trainguard.sanitize.core.source import marked

_SAMPLE = 2  # parameters followed per optimizer (one polluted gradient is proof)


class _Watched:
    __slots__ = ("grad_ref", "version", "first_seen", "polluted", "opt_key", "handle", "backward")

    def __init__(self) -> None:
        self.grad_ref: Any = None
        self.version = -1
        self.first_seen = True
        self.polluted = False
        self.opt_key: int | None = None
        self.handle: Any = None
        self.backward = -1  # index of the backward that added onto the stale gradient


class GradsAccumulate(Check):
    code = "TG301"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        # id(param) -> (weakref(param), _Watched)
        self.params: dict[int, tuple[Any, _Watched]] = {}
        # keyed by id(optimizer): a WeakKeyDictionary would build a weak reference per look-up
        self.sampled: dict[int, list[int]] = {}
        self.polluted_by: dict[int, int] = {}

    def _sample(self, optimizer: Any) -> list[int]:
        ids = self.sampled.get(id(optimizer))
        if ids is None:
            ids = []
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is not None and p.requires_grad and len(ids) < _SAMPLE:
                        ids.append(id(p))
                        if id(p) not in self.params:
                            watched = _Watched()
                            watched.handle = p.register_post_accumulate_grad_hook(
                                self._make_hook(watched))
                            self.params[id(p)] = (weakref.ref(p), watched)
            if ids:
                key = id(optimizer)
                self.sampled[key] = ids
                weakref.finalize(optimizer, self._forget, key)
        return ids

    def _forget(self, key: int) -> None:
        self.sampled.pop(key, None)
        self.polluted_by.pop(key, None)

    def _make_hook(self, watched: _Watched) -> Any:
        def after_accumulate(param: Any) -> None:
            if not watched.first_seen:
                watched.first_seen = True
                grad = param.grad
                same = watched.grad_ref is not None and watched.grad_ref() is grad
                # exactly one in-place accumulation since the step: nothing zeroed it
                watched.polluted = same and grad._version == watched.version + 1
                # the backward running now: its index is the count of those completed before it
                watched.backward = self.state.backward_count
                if watched.polluted and watched.opt_key is not None:
                    key = watched.opt_key
                    self.polluted_by[key] = self.polluted_by.get(key, 0) + 1
        return after_accumulate

    def on_zero_grad(self, owner: Any, set_to_none: bool) -> None:
        if not self.polluted_by:
            return
        if hasattr(owner, "param_groups"):
            zeroed = {id(p) for g in owner.param_groups for p in g["params"]}
        else:
            zeroed = {id(p) for p in owner.parameters()}
        for pid in zeroed & self.params.keys():
            self.params[pid][1].polluted = False

    def on_step_pre(self, optimizer: Any) -> None:
        if not self.polluted_by or not self.polluted_by.get(id(optimizer)):
            return
        ids = self.sampled.get(id(optimizer), [])
        still = []
        backward = -1
        for pid in ids:
            ref, watched = self.params[pid]
            p = ref()
            if p is None or not watched.polluted:
                continue
            grad = p.grad
            if grad is None or watched.grad_ref() is not grad:  # set to None and rebuilt since
                continue
            still.append(p)
            backward = watched.backward
        self.polluted_by.pop(id(optimizer), None)
        if still:
            # at the cause: the backward that added onto the gradients the previous step used
            # (the last 8 backward calls are kept; else at this step)
            where = next((b.where for b in self.state.backwards if b.index == backward), None)
            step_at = user_location(sys._getframe(1)) if where is not None else None
            if step_at is not None and marked(self.code, step_at):
                return  # declared accumulation, marked on the step line as documented before
            lead = ("this backward added onto gradients that still held the previous step's, "
                    "and " if where is not None else "")
            at = f" at {short_location(step_at)}" if step_at is not None else ""
            self.report(
                f"{lead}{type(optimizer).__name__}.step() at optimizer step "
                f"{self.state.step + 1}{at} used "
                f"gradients that still hold the previous step's: {len(still)} of {len(ids)} "
                f"followed parameters (shapes {', '.join(str(tuple(p.shape)) for p in still[:3])}) "
                "were never zeroed between the two steps, so every backward adds onto all earlier "
                "ones",
                fix="call optimizer.zero_grad() once per step (before backward, or after step); "
                    "for intended accumulation across steps, mark this line "
                    "`# trainguard: ignore[TG301]`",
                where=where,
            )

    def release(self) -> None:
        for _, watched in self.params.values():
            if watched.handle is not None:
                watched.handle.remove()
                watched.handle = None

    def on_settle(self) -> None:
        # Settled steps are not judged: take the hooks off, so their backward calls do not pay
        # for a call into Python per followed parameter, and follow nothing until on_resume.
        self.release()
        for _, watched in self.params.values():
            watched.first_seen = True
            watched.polluted = False
        self.polluted_by = {}

    def on_resume(self, boundary: bool) -> None:
        for ref, watched in self.params.values():  # two per optimizer: put back their hooks
            p = ref()
            # one frozen since (requires_grad_(False)) takes no hook and gets no gradient; it is
            # hooked again at a later resume if it is unfrozen
            if p is not None and watched.handle is None and p.requires_grad:
                watched.handle = p.register_post_accumulate_grad_hook(self._make_hook(watched))
        # Right after a settled step (nothing ran since): follow the gradients that step used, as
        # on_step would have, so the first step of a changed loop is judged. In the middle of a
        # cycle a backward may already have added into them: follow nothing new.
        if boundary:
            for optimizer in list(self.state.optimizers):
                if id(optimizer) == self.state.last_stepped:
                    self._follow(optimizer)

    def on_step(self, optimizer: Any) -> None:
        self._follow(optimizer)

    def _follow(self, optimizer: Any) -> None:
        for pid in self._sample(optimizer):
            ref, watched = self.params[pid]
            p = ref()
            if p is None:
                continue
            grad = p.grad
            watched.grad_ref = weakref.ref(grad) if grad is not None else None
            watched.version = grad._version if grad is not None else -1
            watched.first_seen = False
            watched.polluted = False
            watched.opt_key = id(optimizer)

    def on_exit(self) -> None:
        self.release()
        self.params.clear()
        self.sampled = {}
        self.polluted_by = {}
