"""TG301 grads-accumulate: an optimizer step used gradients left over from the previous step.

What it watches: after each ``optimizer.step()``, up to three of the optimizer's parameters that
have a gradient (its first, middle and last): the gradient tensor (weakly) and its version counter. A post-accumulate-grad hook
on those parameters (``Tensor.register_post_accumulate_grad_hook``) sees the first backward that
adds into each gradient after the step. The hooks are taken off while the loop is settled (its
steps are not judged, ``on_settle``) and put back when checking resumes.

When it fires: that first backward added onto the very tensor the previous step used, untouched in
between (the same object, its version advanced by exactly this accumulation): nothing zeroed it,
neither ``zero_grad()`` (which sets ``None`` or zeroes in place), ``p.grad = None`` nor
``p.grad.zero_()``. The finding is judged at the next ``optimizer.step()`` of that optimizer, unless
the gradients were zeroed after that backward (a GAN's generator gradients polluted by the
discriminator's backward, then zeroed before the generator's step), and reported at the cause: the
line of the step's first forward, at the top of the step where the missing ``zero_grad`` goes, when
that forward ran in a frame the backward's stack holds (the loop body or step function that also
calls backward; the order of PyTorch's tutorials: zero_grad, forward, backward, step), unless one
function calls both the backward and the step and that forward ran in its caller (an
``update(loss, optimizer)`` helper owns the update: at its backward); else the line of the step,
when it runs in a function of its own that the backward's function calls after the backward
(``zero_grad`` belongs right after it there); else of the latest backward that added onto the
stale gradients before the step (of the last 8 backward calls; else at the step line), naming the
step; when that backward runs in a helper that the step's code calls, the line in the frame both
stacks share that called it.

A backward run once before the training loop whose gradients the loop, zeroing only after
``step()``, never clears before its first step: ``core/first_step.py``, reported at the call that
led to that backward in the function holding the loop, judged at the optimizer's second step.

Silent on: ``zero_grad`` before backward or at the end of the step, ``set_to_none`` either way,
``p.grad = None``, ``model.zero_grad()``, LBFGS closures (they zero inside ``step``), manual SGD
without an optimizer, several optimizers, and gradient accumulation over micro-batches (zeroed after
each step). Declared accumulation across steps is silenced with ``# trainguard: ignore[TG301]`` on
the backward line or on the step line.

Cost: per checked optimizer step, 3 parameters per optimizer followed (hooks taken off while the
loop is settled); per ``zero_grad``, a set of the owner's parameter ids.

Reference: ``torch.optim.Optimizer.zero_grad`` docs
(https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html); "Why do we need to
call zero_grad() in PyTorch?" (https://flisks.com/python-why-do-we-need-to-call-zero-grad-in-pytorch).
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from trainguard.sanitize.core.callstack import user_stack
from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.first_step import FirstStep
from trainguard.sanitize.core.frames import short_location, user_frame, user_location
from trainguard.sanitize.core.loops import (before_the_loop, caller_site, inner_loop,
                                             owns_update)
from trainguard.sanitize.core.params import zeroed_by
from trainguard.sanitize.core.source import marked

_SAMPLE = 3  # parameters followed per optimizer (one polluted gradient is proof)
_OWNERS = 64  # zero_grad owners whose latest call is remembered


class _Watched:
    __slots__ = ("grad_ref", "version", "first_seen", "polluted", "opt_key", "handle", "backward",
                 "stack", "at_step")

    def __init__(self) -> None:
        self.grad_ref: Any = None
        self.version = -1
        self.first_seen = True
        self.polluted = False
        self.opt_key: int | None = None
        self.handle: Any = None
        self.backward = -1  # index of the backward that added onto the stale gradient
        self.stack: Any = ()  # ... and the user's stack that called it (empty: not known)
        self.at_step = -1  # the run's optimizer step count when ``backward`` was recorded


class GradsAccumulate(Check):
    code = "TG301"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        # id(param) -> (weakref(param), _Watched)
        self.params: dict[int, tuple[Any, _Watched]] = {}
        # keyed by id(optimizer): a WeakKeyDictionary would build a weak reference per look-up
        self.sampled: dict[int, list[int]] = {}
        self.polluted_by: dict[int, int] = {}
        # id(owner) -> (weakref(owner), the user's line): the zero_grad calls seen, latest last
        self.zeroed_at: dict[int, tuple[Any, Any]] = {}
        # the first few forwards with grad of the current step (checked steps), first first:
        # (steps completed, its line, id and code of its user frame, weakref to the module)
        self.forwards: list[tuple[int, Any, int, Any, Any]] = []
        self.closure_calls: dict[int, int] = {}  # id(optimizer) -> closure calls in its step
        self.first = FirstStep()  # gradients a backward before the loop left for the first step

    def on_built(self, obj: Any, where: Any) -> None:
        self.first.built(obj)

    def on_backward_done(self, call: Any) -> None:
        self.first.backward_done(sys._getframe(1))

    def on_root_forward(self, call: Any) -> None:
        if not call.grad_enabled or self.state.in_backward or call.where is None:
            return
        new = not self.forwards or self.forwards[0][0] != self.state.step
        if new or len(self.forwards) < 4:
            frame = user_frame(sys._getframe(1))
            if frame is None:
                return
            if new:
                self.forwards = []
            self.forwards.append((self.state.step, call.where, id(frame), frame.f_code,
                                  weakref.ref(call.module)))

    def _sample(self, optimizer: Any) -> list[int]:
        ids = self.sampled.get(id(optimizer))
        if ids is None:
            ids = []
            # spread over the optimizer's list (first, middle, last): a zero_grad that clears
            # only one part of the model (the encoder's) leaves the others stale
            with_grad = [p for group in optimizer.param_groups for p in group["params"]
                         if p.grad is not None and p.requires_grad]
            picked = {0, len(with_grad) // 2, len(with_grad) - 1} if with_grad else set()
            for i in sorted(picked)[:_SAMPLE]:
                p = with_grad[i]
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
            if watched.first_seen:
                if watched.polluted and watched.opt_key is not None and \
                        watched.at_step != self.state.step:
                    # another backward onto the stale gradient, the first since any optimizer
                    # stepped is the cause (a GAN's discriminator step after the generator's
                    # backward went through the discriminator: the discriminator's own first
                    # backward lacks the zero_grad; its later ones add to it on purpose)
                    watched.backward = self.state.backward_count
                    watched.stack = _stack()
                    watched.at_step = self.state.step
                return
            watched.first_seen = True
            grad = param.grad
            same = watched.grad_ref is not None and watched.grad_ref() is grad
            # exactly one in-place accumulation since the step: nothing zeroed it
            watched.polluted = same and grad._version == watched.version + 1
            # the backward running now: its index is the count of those completed before it
            watched.backward = self.state.backward_count
            watched.at_step = self.state.step
            if watched.polluted and watched.opt_key is not None:
                watched.stack = _stack()
                key = watched.opt_key
                self.polluted_by[key] = self.polluted_by.get(key, 0) + 1
        return after_accumulate

    def on_zero_grad(self, owner: Any, set_to_none: bool) -> None:
        self.first.zeroed(owner)
        zeroed_at = self.zeroed_at
        known = zeroed_at.pop(id(owner), None)  # (re-inserted: the latest call comes last)
        if known is not None and known[0]() is owner:
            zeroed_at[id(owner)] = (known[0], user_location(sys._getframe(1)))
        elif len(zeroed_at) < _OWNERS:
            zeroed_at[id(owner)] = (weakref.ref(owner), user_location(sys._getframe(1)))
        if not self.polluted_by:
            return
        zeroed = {id(p) for p in zeroed_by(owner)}
        for pid in zeroed & self.params.keys():
            self.params[pid][1].polluted = False

    def on_step_pre(self, optimizer: Any) -> None:
        leftover = self.first.judge(optimizer, bool(self.polluted_by.get(id(optimizer))))
        if leftover is not None:  # a backward before the loop left its gradients to step 1
            self.report(leftover[1], fix=FirstStep.FIX, where=leftover[0])
        if not self.polluted_by or not self.polluted_by.get(id(optimizer)):
            return
        ids = self.sampled.get(id(optimizer), [])
        still = []
        backward, stack = -1, ()
        for pid in ids:
            ref, watched = self.params[pid]
            p = ref()
            if p is None or not watched.polluted:
                continue
            grad = p.grad
            if grad is None or watched.grad_ref() is not grad:  # set to None and rebuilt since
                continue
            still.append(p)
            backward, stack = watched.backward, watched.stack
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
            cause = self._cause(optimizer, still, where, step_at)
            closure = bool(self.closure_calls.get(id(optimizer)))
            if cause is not None:
                where, lead = cause
            elif where is not None and stack and not marked(self.code, where):
                top = self._step_start(stack, optimizer)
                step_stack = user_stack(sys._getframe(1))
                if top is not None and owns_update(stack, step_stack, top[1]):
                    lead = ("this function runs the backward and the step, and nothing in it "
                            "zeroes the gradients (zero_grad belongs before this backward); so ")
                elif top is not None and top[0][:2] != where[:2]:
                    where, lead = top[0], (
                        f"this forward starts the step, and nothing zeroes the gradients before "
                        f"it (the backward at {short_location(where)} then adds onto the "
                        "previous step's); so ")
                elif not closure:  # (a closure's backward: its own line, inside the closure)
                    where, lead = caller_site(where, stack, step_stack, lead, step_at)
            previous = "closure evaluation's (the step calls its closure several times)" \
                if closure else "step's"
            lead = lead.replace("previous step's", "previous evaluation's") if closure else lead
            self.report(
                f"{lead}{type(optimizer).__name__}.step() at optimizer step "
                f"{self.state.step + 1}{at} used "
                f"gradients that still hold the previous {previous}: {len(still)} of {len(ids)} "
                f"followed parameters (shapes {', '.join(str(tuple(p.shape)) for p in still[:3])}) "
                "were never zeroed between the two steps, so every backward adds onto all earlier "
                "ones",
                fix=("call optimizer.zero_grad() first thing inside the closure; " if closure else
                     "call optimizer.zero_grad() once per step (before backward, or after step); ")
                + "for intended accumulation across steps, mark this line "
                    "`# trainguard: ignore[TG301]`",
                where=where,
            )

    def _step_start(self, backward_stack: Any, optimizer: Any) -> Any:
        """The line of this step's first forward of a model ``optimizer`` steps (else its first
        forward: a generator's detached samples come before the student's forward) when it ran in
        a frame the backward's call stack holds (the loop body or step function that also calls
        backward): where a missing ``zero_grad`` goes, at the top of the step (tutorials' order:
        zero_grad, forward, backward, step), with that frame's index in the stack; else None."""
        if not self.forwards or self.forwards[0][0] != self.state.step:
            return None
        held = {id(p) for g in optimizer.param_groups for p in g["params"]}
        _, where, fid, code, _ = next((f for f in self.forwards if _holds_any(f[4](), held)),
                                      self.forwards[0])
        return next(((where, i) for i, e in enumerate(backward_stack)
                     if e[0] == fid and e[1] is code), None)

    def _cause(self, optimizer: Any, stale: list[Any], backward_at: Any,
               step_at: Any) -> tuple[Any, str] | None:
        """Where the zeroing that is missing belongs, with the sentence that says why, or None
        (then the backward that added onto the stale gradients is the place): the latest
        ``zero_grad`` seen that clears some of this optimizer's parameters (it runs once per
        epoch, before the loop, or clears another part of the model); else, when that backward
        runs in a loop of its own inside the step's loop (micro-batches, views), that loop's
        first line."""
        held = {id(p) for g in optimizer.param_groups for p in g["params"]}
        for ref, where in reversed(list(self.zeroed_at.values())):
            owner = ref()
            if owner is None or where is None:
                continue
            ids = {id(p) for p in zeroed_by(owner)}
            if not ids & held:
                continue
            if not {id(p) for p in stale} <= ids:
                part = ("it clears only part of the optimizer's parameters, not the ones listed "
                        "below")
            elif backward_at is not None and before_the_loop(where, backward_at):
                part = ("it runs once, before the loop that runs the backward and the step, not "
                        "in every iteration")
            else:
                break  # it runs in the loop: a branch or an iteration that skips it is the cause
            return where, (f"{type(owner).__name__}.zero_grad() here is the latest zeroing of "
                           f"these gradients, and {part}; so ")
        if backward_at is None or step_at is None or backward_at[0] != step_at[0]:
            return None
        loop = inner_loop(backward_at, step_at)
        if loop is None:
            return None
        return ((backward_at[0], loop.lineno, loop.col_offset + 1),
                f"the backward at line {backward_at[1]} runs in this loop inside the step's "
                "loop, and nothing zeroes the gradients before it; so ")

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

    def on_closure(self, optimizer: Any, calls: int) -> None:
        """A closure evaluation inside ``step()``: from the second on, the optimizer has read the
        gradients of the previous one, and this one must start from zero like a step."""
        self.closure_calls[id(optimizer)] = calls
        if calls:
            self.on_step_pre(optimizer)
            self._follow(optimizer)
            self.forwards = []  # this evaluation's first forward starts it

    def on_step(self, optimizer: Any) -> None:
        if self.closure_calls.get(id(optimizer)):
            # the last closure evaluation, judged now (the step count has just advanced: its
            # first forward is this step's)
            if self.forwards and self.forwards[0][0] == self.state.step - 1:
                self.forwards = [(self.state.step, *f[1:]) for f in self.forwards]
            self.on_step_pre(optimizer)
        self.closure_calls.pop(id(optimizer), None)
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


def _stack() -> Any:
    """The user's stack of the backward running now: on the CPU the hook runs inside the user's
    backward call; a device's autograd thread has no user frame (then empty)."""
    try:
        return user_stack(sys._getframe(2))
    except ValueError:  # no Python frame above the hook (a device thread)
        return ()


def _holds_any(module: Any, held: set[int]) -> bool:
    """``module`` (None when freed) has a parameter among the ids ``held``."""
    return module is not None and any(id(p) in held for p in module.parameters())
