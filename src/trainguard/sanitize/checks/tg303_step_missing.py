"""TG303 step-missing: backward runs again and again but the optimizer never steps.

What it watches: ``zero_grad()`` calls of optimizers that have not stepped yet (an optimizer that
has stepped once is dropped at once, so a working loop pays one set look-up per ``zero_grad``). For
each, up to eight of its trainable parameters: whether a backward since the previous
``zero_grad`` gave them a gradient, and their version counters (every in-place update bumps them).

When it fires: at the end of the run, for an optimizer that went through at least two full cycles
of ``zero_grad`` -> backward reaching its parameters -> ``zero_grad`` again, whose parameters never
changed in those cycles, and whose ``step()`` was not called once in the whole watched run.
Reported at the first backward after the optimizer's previous ``zero_grad`` when the second
cycle completed (a GAN's discriminator backward, not the generator's through it), with the whole
run's counts.
Also, when the optimizer's own ``zero_grad`` never runs (it sits with the step in a branch that is
never taken, e.g. ``if (i + 1) % accum == 0`` with fewer batches than ``accum``): for each
optimizer user code built (noted at construction, with its parameters' version counters), at
exit: at least two backward calls since it was built, its (sampled) parameters hold finite
gradients not all zero, their version counters never moved, and it never stepped; reported at the
last backward's line. Either finding is reported instead at the ``step()`` call written for that
optimizer, when one was found in the functions running at its first backward calls
(``core/step_site.py``: ``X.step(...)`` whose receiver or first argument is the optimizer), with
the condition around it named; or at that condition when the block it guards only steps (the
step's own condition, huggingface/transformers#2995). With no such call, when a scheduler of
that optimizer was stepped in a function that never called backward and its ``last_epoch`` kept
up with the backward calls (a per-step hook that steps only the schedule, an update helper whose
scheduler branch replaced the optimizer's step), at that ``scheduler.step()``.

Silent on: optimizers that step, however late (a backbone optimizer zeroed every step but stepped
only after a warm-up epoch; a gradient probe that uses the training optimizer's ``zero_grad``
before training starts), steps skipped by a ``GradScaler`` (gradients with inf/NaN do not count as
a cycle), manual SGD (``p -= lr * p.grad`` changes the version counter), gradient accumulation
(zeroed at the step), saliency maps and attacks that call backward without an optimizer or zero
with ``model.zero_grad()``, backward passes that do not reach this optimizer's parameters
(another model's).

Cost: per optimizer built, 8 version counters noted once, and until its first step, at each of its
first 3 backward calls, a look for its ``step()`` call in up to 4 user frames (one parse per file,
cached); per ``zero_grad`` of an optimizer that
never stepped, 8 parameters' version counters and
gradients (finiteness read on CPU and CUDA only); one set look-up once it has stepped; at exit, one
pass over the candidates.

Reference: ``torch.optim`` "Taking an optimization step"
(https://pytorch.org/docs/stable/optim.html#taking-an-optimization-step).
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.frames import user_frame, user_location
from trainguard.sanitize.core.step_site import StepSite, find_step_site
from trainguard.sanitize.core.values import readable

_SAMPLE = 8
_CYCLES = 2
_TRIES = 3  # backward calls per optimizer at which its step() call is looked for


class _Followed:
    __slots__ = ("params", "versions", "start", "backwards", "cycles", "optimizer", "name",
                 "shapes", "where", "keep", "site", "tries", "sched")

    def __init__(self, optimizer: Any, params: list[Any], backwards: int) -> None:
        self.optimizer = weakref.ref(optimizer)
        self.name = type(optimizer).__name__
        self.params = [weakref.ref(p) for p in params]
        self.versions = [p._version for p in params]
        self.start = backwards  # backward calls completed when it was first zeroed
        self.backwards = backwards  # ... when it was last zeroed after a backward
        self.cycles = 0  # zero_grad calls that cleared gradients a backward had filled
        self.shapes = ""
        self.where: Any = None  # the backward line that completed the second cycle
        self.keep: list[Any] = []  # the sampled parameters, held (built optimizers only)
        self.site: StepSite | None = None  # the step() written for it (built optimizers only)
        self.tries = 0  # backward calls at which that call was looked for
        # where user code first stepped a scheduler of this optimizer, in a function that never
        # called backward (a hook run per step: ``optimizer_step(opt, sched)``), and the scheduler,
        # held like ``keep`` (with it the optimizer) until the optimizer steps or is judged
        self.sched: tuple[Any, str, Any] | None = None


class StepMissing(Check):
    code = "TG303"
    # listened to only while some optimizer has gone two cycles without a step, so that one
    # stepping after its last zero_grad (or dying before the end) is known to have stepped, and
    # while an optimizer user code built has not stepped yet (its step() call is looked for at
    # the first backward calls)
    on_demand = ("on_step", "on_backward")

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.followed: "weakref.WeakKeyDictionary[Any, _Followed]" = weakref.WeakKeyDictionary()
        self.done: "weakref.WeakSet[Any]" = weakref.WeakSet()
        # candidates: two cycles without a step so far, keyed by the optimizer's id
        self.pending: dict[int, _Followed] = {}
        # optimizers user code built, noted at construction (their zero_grad may never run)
        self.built: "weakref.WeakKeyDictionary[Any, _Followed]" = weakref.WeakKeyDictionary()
        self.exited = False  # after on_exit a freed optimizer is not judged (nor reported)
        self.backward_codes: set[Any] = set()  # the user functions that called backward

    def on_built(self, obj: Any, where: Any) -> None:
        if not hasattr(obj, "param_groups") or where is None:
            return
        params = [p for g in obj.param_groups for p in g["params"] if p.requires_grad]
        if params:
            followed = self.built[obj] = _Followed(obj, params[:_SAMPLE],
                                                   self.state.backward_count)
            # the parameters are held so that an optimizer dropped before the end (built by a
            # trainer object that is gone) is judged when it is freed
            followed.keep = params[:_SAMPLE]
            weakref.finalize(obj, self._freed, id(obj), followed)
            self.arm()

    def on_backward(self, call: Any) -> None:
        frame = user_frame(sys._getframe(1))
        if frame is not None and len(self.backward_codes) < 16:
            self.backward_codes.add(frame.f_code)
        # Before an optimizer's first step: find the step() written for it in the functions
        # running now, so that a step that never runs is reported where it is written.
        for optimizer, followed in list(self.built.items()):
            if followed.site is None and followed.tries < _TRIES and followed.keep:
                followed.tries += 1
                followed.site = find_step_site(optimizer, sys._getframe(1))

    def on_scheduler_step(self, scheduler: Any) -> None:
        """Note where a scheduler of an optimizer that never stepped is stepped, when that is a
        function apart from the ones calling backward: the per-step hook meant to step both."""
        optimizer = getattr(scheduler, "optimizer", None)
        followed = self.built.get(optimizer) if optimizer is not None else None
        if followed is None or not followed.keep:  # (one dict look-up once it has stepped)
            return
        frame = user_frame(sys._getframe(1))
        if followed.sched is None and frame is not None and \
                frame.f_code not in self.backward_codes:
            followed.sched = (user_location(frame), f"{type(scheduler).__name__}.step()",
                              scheduler)

    def _freed(self, key: int, followed: _Followed) -> None:
        try:
            if key not in self.pending and followed.keep and not self.exited:
                self._judge_built(followed)
        finally:
            followed.keep = []

    def _judge_built(self, followed: _Followed) -> None:
        message = self._never_stepped(followed)
        hook = _hook(followed, self.state.backward_count)
        followed.keep, followed.sched = [], None
        if message:
            last = self.state.backwards[-1].where if self.state.backwards else None
            where, said = _at_site(followed.site, last, hook)
            self.report(message + said, fix="call optimizer.step() after loss.backward() in every "
                        "training step (a step inside a condition that is never true: check the "
                        "counter it tests)", where=where)

    def on_zero_grad(self, owner: Any, set_to_none: bool) -> None:
        if not hasattr(owner, "param_groups") or owner in self.done:
            return
        if owner in self.state.optimizers:  # it has stepped: nothing to watch any more
            self._stepped(owner)
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
        if followed.where is not None:  # a candidate already: only keep the counts
            followed.backwards = count
            followed.cycles += 1
            return
        self._cycle(owner, followed)

    def on_step(self, optimizer: Any) -> None:
        if id(optimizer) in self.pending:
            self._stepped(optimizer)
        followed = self.built.get(optimizer)
        if followed is not None:
            followed.keep, followed.sched = [], None  # it steps: nothing to judge at exit
            followed.tries = _TRIES
        if not self.pending and not any(f.keep and f.tries < _TRIES
                                        for f in self.built.values()):
            self.disarm()

    def on_exit(self) -> None:
        self.exited = True
        for followed in list(self.pending.values()):
            optimizer = followed.optimizer()
            if optimizer is not None and optimizer in self.state.optimizers:
                continue
            followed.backwards = self.state.backward_count
            built = self.built.get(optimizer) if optimizer is not None else None
            hook = _hook(built, self.state.backward_count) if built is not None else None
            where, said = _at_site(built.site if built is not None else None, followed.where, hook)
            if built is not None:
                built.sched = None
            self.report(_message(followed) + said,
                        fix="call optimizer.step() after loss.backward() in every training step",
                        where=where)
        for optimizer, followed in list(self.built.items()):
            if (id(optimizer) in self.pending or optimizer in self.done
                    or optimizer in self.state.optimizers):
                followed.keep, followed.sched = [], None
                continue
            self._judge_built(followed)
        self.pending.clear()
        self.built.clear()
        self.disarm()

    def _never_stepped(self, followed: _Followed) -> str:
        """For an optimizer built by user code that never stepped nor was zeroed in cycles: a
        message when at least two backward calls ran since it was built, its (sampled)
        parameters hold finite gradients, not all zero, and never changed; else ''."""
        import torch

        backwards = self.state.backward_count - followed.start
        params = list(followed.keep) or [r() for r in followed.params]
        if backwards < _CYCLES or any(p is None for p in params):
            return ""
        if any(p._version != v for p, v in zip(params, followed.versions)):
            return ""  # updated some other way (manual SGD, a copy from another model)
        grads = [p.grad for p in params if p.grad is not None]
        if not grads or not readable(*grads):
            return ""  # no backward reached them, or values that cannot be read (meta)
        if not all(bool(torch.isfinite(g).all()) for g in grads) or \
                not any(bool(g.any()) for g in grads):
            return ""
        name = followed.name
        shapes = ", ".join(str(tuple(p.shape)) for p in params[:3])
        return (f"{backwards} backward call{'s' if backwards != 1 else ''} since {name} was built "
                f"left gradients on its parameters (shapes {shapes}), and {name}.step() was never "
                "called in the whole run: the parameters have not changed")

    def release(self) -> None:
        self.exited = True  # switched off: freed optimizers are no longer judged

    def _stepped(self, optimizer: Any) -> None:
        self.done.add(optimizer)
        self.followed.pop(optimizer, None)
        if self.pending.pop(id(optimizer), None) is not None and not self.pending:
            self.disarm()

    def _cycle(self, optimizer: Any, followed: _Followed) -> None:
        import torch

        since = followed.backwards  # backward calls completed at its previous zero_grad
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
        if not readable(*grads):
            return  # values that cannot be read (meta): the cycle is not counted
        # note: a CUDA sync, only while this optimizer has never stepped
        if not all(bool(torch.isfinite(g).all()) for g in grads):
            return  # a GradScaler skips steps whose gradients overflowed
        followed.cycles += 1
        if followed.cycles < _CYCLES:
            return
        # the first backward after its previous zero_grad: the one meant to fill the gradients
        # this optimizer should have applied (a later one may be another model's, through it)
        first = next((b.where for b in self.state.backwards if b.index == since), None)
        if first is None and self.state.backwards:
            first = self.state.backwards[-1].where
        followed.where = first if first is not None else user_location(sys._getframe(1))
        followed.shapes = ", ".join(str(tuple(p.shape)) for p in params[:3])
        self.pending[id(optimizer)] = followed
        self.arm()


def _message(followed: _Followed) -> str:
    backwards = followed.backwards - followed.start
    cycles = followed.cycles
    name = followed.name
    return (f"{backwards} backward call{'s' if backwards != 1 else ''} filled the gradients of "
            f"{name}'s parameters (shapes {followed.shapes}) and zero_grad() cleared them "
            f"{cycles} time{'s' if cycles != 1 else ''}, and {name}.step() was never called in "
            f"the whole run: the parameters have not changed")


def _hook(followed: _Followed, backwards: int) -> tuple[Any, str] | None:
    """The scheduler step noted for ``followed`` when the scheduler's own count of steps
    (``last_epoch``) kept up with the backward calls since the optimizer was built (a hook run
    every step, not a per-epoch ``scheduler.step()``), else None."""
    scheduler = followed.sched[2] if followed.sched is not None else None
    steps = getattr(scheduler, "last_epoch", None)
    if not isinstance(steps, int) or steps < max(2, backwards - followed.start - 1):
        return None
    return followed.sched[:2]


def _at_site(site: StepSite | None, fallback: Any,
             hook: tuple[Any, str] | None = None) -> tuple[Any, str]:
    """Where to report (the ``step()`` written for the optimizer, else the ``hook`` that steps
    its scheduler every step, else ``fallback``: a backward line) and the sentence that names
    it."""
    if site is None and hook is not None:
        return hook[0], (f"; `{hook[1]}` of its learning-rate scheduler runs here after every "
                         "backward, in a function that never calls the optimizer's step()")
    if site is None:
        return fallback, ""
    if site.guard is not None and site.guard[2] and site.guard[0] != site.where[1]:
        # a block that only steps: its condition, never true, is what to change
        return ((site.where[0], site.guard[0], site.guard[2]),
                f"; its step call (`{site.text}`, line {site.where[1]}) sits in a block that "
                f"only steps, under `{site.guard[1]}` (here), which never let it run")
    guard = (f", inside `{site.guard[1]}` (line {site.guard[0]}), which never let it run"
             if site.guard is not None and site.guard[0] != site.where[1] else
             ", which never ran")
    return site.where, f"; its step call is written here (`{site.text}`){guard}"
