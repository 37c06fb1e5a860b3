"""TG302 zero-grad-before-step: gradients were zeroed between ``backward()`` and ``step()``.

What it watches: ``Optimizer.zero_grad``/``Module.zero_grad`` calls made after a backward and before
the next optimizer step (a cheap comparison of two counters; zeroing at the start or at the end of
the step never gets past it), and the next ``optimizer.step()``.

When it fires: ``optimizer.step()`` runs with no backward since that ``zero_grad``, the zeroed
parameters belong to this optimizer, and the gradients of (up to eight of) them are now ``None`` or
all zero: the step applies nothing (SGD) or only momentum/weight decay (Adam). Reported at the
``zero_grad`` line (the cause), naming the step. Also when a ``zero_grad`` discards what a backward
since the last step accumulated and another backward follows before the step (zeroing at the top
of a micro-batch accumulation loop): the cleared gradients (8 sampled) are not all zero, the
backward before it kept no graph, the next step's optimizer holds the zeroed parameters, their
version counters did not move in between, and the backward before the step is written where the
discarded one is (the same micro-batch code run again; other backward calls may follow it, such as
a debug helper's on a copy of the model). Seen at two steps, it is reported at that ``zero_grad``.
When the later backward is another line, the discard is reported only when it is lost for good:
the ``zero_grad`` covered every parameter of the stepping optimizer, and a sampled parameter it
cleared (not zero then) has no gradient at the step, as no later backward reaches it (a local
loss backpropagated inside ``forward``, then zeroed by an optimizer hook;
blackfeather-wang/InfoPro-Pytorch#1). A ``zero_grad`` inside a user function that the
stepping frame called between the backward and the step (a gradient logger) is reported at that
call, its own line in the message (``_call_cause``).
Also a backward placed after the step (``core/unused_backward.py``): it adds onto gradients a step
has used, no optimizer holding a parameter it reached steps after it, a ``zero_grad`` clears them
all, and the next step of that optimizer follows another backward with no other ``zero_grad`` of
those parameters in between; seen at two steps, reported at that backward's line, naming the
step before it and the ``zero_grad``.

Silent on: ``zero_grad`` before backward or after step, ``p.grad = None``, LBFGS closures (they zero
inside ``step``), GANs whose other optimizer is zeroed in between (its parameters are not this
optimizer's), gradients set by hand after zeroing (they are not zero), declared accumulation,
zeroing a part of the model on purpose (``model.embedding.zero_grad()`` to keep a layer frozen:
the optimizer's other parameters still hold their gradients); SAM (an optimizer zeroing inside its
own ``first_step``; a hand-written ascent that moves the parameters between the two backward
calls), per-task gradients read one by one from a retained graph (gradient surgery), a gradient
probe before training (its backward is written elsewhere), a ``GradScaler`` that skipped the step
(the cleared gradients hold inf/NaN; all of the owner's gradients are read on this path), an
epoch's remainder of a declared accumulation dropped by the next epoch's ``zero_grad`` (fewer
backward calls than the optimizer's regular count, and a full count before the step after it);
for a backward after the step, a GAN's generator loss through the discriminator (the generator's
step uses it), an input's gradient (saliency, adversarial inputs), a model in eval mode, a probe
that zeroes its own gradients.

Cost: per checked ``zero_grad``, two counters; only for a ``zero_grad`` between backward and step,
8 gradients and version counters read at most (skipped on devices whose values are not read:
``values.py``) and up to 8 frames looked at, and at the next step 8 gradients read at most. A
backward after a step, before its optimizer is zeroed: one graph walk (``GRAPH_NODES``).

Reference: ``torch.optim.Optimizer.zero_grad``
(https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html) and the
"Optimizing Model Parameters" tutorial's step order
(https://pytorch.org/tutorials/beginner/basics/optimization_tutorial.html).
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from trainguard.sanitize.core.callstack import cause_line, shared_depth, user_stack
from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.frames import (is_trainguard_file, is_user_code, short_location,
                                             user_location)
from trainguard.sanitize.core.params import zeroed_by
from trainguard.sanitize.core.unused_backward import Unused, UnusedBackwards
from trainguard.sanitize.core.values import readable

_SAMPLE = 8


class ZeroGradBeforeStep(Check):
    code = "TG302"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        # (weakref(owner), backward count at the zero_grad, its location, set_to_none, its user
        # stack, the location of the backward before it)
        self.pending: tuple | None = None
        # a zero_grad that discarded the gradients of a backward since the last step, while
        # another backward follows it before the step (zeroing at the top of an accumulation
        # micro-loop): its _Discard per zeroed owner (a debug helper zeroing a copy of the model
        # keeps its own), judged at the next step
        self.discards_now: dict[int, _Discard] = {}
        # zero_grad location -> steps at which it was seen discarding (reported at the second)
        self.discards: dict[Any, int] = {}
        # id(optimizer) -> backward calls since the previous step at its latest step that no
        # zero_grad had cut short, and whether the one before agreed (the loop's regular
        # accumulation count)
        self.regular: dict[int, tuple[int, bool]] = {}
        # backward calls made after a step into its gradients (core/unused_backward.py), and the
        # backward lines found wasted: line -> the step at which first seen (reported at the
        # second, -1 once reported)
        self.unused = UnusedBackwards(self.state)
        self.wasted: dict[Any, int] = {}

    def on_built(self, obj: Any, where: Any) -> None:
        if hasattr(obj, "param_groups"):
            self.unused.built.add(obj)

    def on_backward(self, call: Any) -> None:
        self.unused.backward(call)

    def on_zero_grad(self, owner: Any, set_to_none: bool) -> None:
        state = self.state
        self.unused.zeroed(owner, sys._getframe(1))
        # state.backwards_at_step is kept on settled steps too, so a zero_grad that breaks a
        # settled loop is judged like any other
        if state.in_step or state.backward_count <= state.backwards_at_step:
            return  # zeroing before the backward or after the step: the usual, correct places
        caller = sys._getframe(1)
        where = user_location(caller)
        last = state.backwards[-1] if state.backwards else None
        stack = user_stack(caller)
        self.pending = (weakref.ref(owner), state.backward_count, where, set_to_none, stack,
                        last.where if last is not None else None)
        if (last is None or last.retain_graph or last.where is None or where is None
                or _own_method(caller, owner)):
            # a graph kept for another backward (per-task gradients read one by one, as gradient
            # surgery does), or an optimizer zeroing inside its own algorithm (SAM's first_step)
            self.discards_now.pop(id(owner), None)
            return
        params = [p for p in zeroed_by(owner) if p.requires_grad and p.grad is not None][:_SAMPLE]
        grads = [p.grad for p in params]
        filled = [bool(g.any()) for g in grads] if grads and readable(*grads) else []
        if not any(filled):
            self.discards_now.pop(id(owner), None)  # nothing learned is thrown away
            return
        import torch

        every = [p.grad for p in zeroed_by(owner) if p.grad is not None]
        if not readable(*every) or not all(bool(torch.isfinite(g).all()) for g in every):
            # a GradScaler skipped the step on inf/NaN gradients and the loop zeroes them: the
            # usual, correct way on; a cleared finite batch is what is looked for
            self.discards_now.pop(id(owner), None)
            return
        self.discards_now.pop(id(owner), None)
        if len(self.discards_now) >= 4:  # the oldest (a copy's, whose optimizer never steps)
            del self.discards_now[next(iter(self.discards_now))]
        self.discards_now[id(owner)] = _Discard(
            owner, params, where, last.where, state.backward_count, filled,
            state.backward_count - state.backwards_at_step, stack)

    def on_step_pre(self, optimizer: Any) -> None:
        cut = False
        if self.discards_now:
            held = {id(p) for p in zeroed_by(optimizer)}
            for key, discard in list(self.discards_now.items()):
                if any(r() is not None and id(r()) in held for r in discard.params):
                    del self.discards_now[key]
                    cut = True
                    self._judge_discard(optimizer, discard, held, sys._getframe(1))
                # else another optimizer's step (an actor-critic's critic stepped before the
                # actor): the discard waits for the step of the optimizer holding its parameters
        if not cut:
            count = self.state.backward_count - self.state.backwards_at_step
            before = self.regular.get(id(optimizer))
            self.regular[id(optimizer)] = (count, before is not None and before[0] == count)
        pending = self.pending
        if pending is None or pending[1] != self.state.backward_count:
            return
        owner = pending[0]()
        if owner is None:
            return
        zeroed = {id(p) for p in zeroed_by(owner)}
        mine = [p for p in zeroed_by(optimizer) if id(p) in zeroed and p.requires_grad][:_SAMPLE]
        if not mine:
            return  # another optimizer's (or model's) gradients were zeroed: a GAN's pattern
        grads = [p.grad for p in mine if p.grad is not None]
        if not readable(*grads):
            return  # values that cannot be read (meta): nothing is known
        # note: a sync on CUDA, paid only on this already-suspicious path
        if any(bool(g.any()) for g in grads):
            return  # gradients were set again (by hand or torch.autograd.grad) after zeroing
        rest = [p.grad for p in zeroed_by(optimizer)
                if id(p) not in zeroed and p.grad is not None][:_SAMPLE]
        if not readable(*rest) or any(bool(g.any()) for g in rest):
            return  # a part zeroed on purpose (a frozen layer): the step still applies the rest
        caller = sys._getframe(1)
        at = short_location(user_location(caller), "the step")
        where, through = _call_cause(pending[4], caller, pending[2], pending[5])
        owner_name = type(owner).__name__
        how = "set them to None, so step() skips every parameter" if pending[3] else \
            "filled them with zeros, so step() moves the parameters by momentum and weight decay only"
        self.report(
            f"{type(optimizer).__name__}.step() at optimizer step {self.state.step + 1} ran on "
            f"zeroed gradients: {owner_name}.zero_grad() {through}came after the last backward "
            f"and {how}; nothing learns from this batch (step at {at})",
            fix="call zero_grad() before loss.backward() (or after optimizer.step()), never between "
                "the two",
            where=where)
        self.pending = None

    def on_step(self, optimizer: Any) -> None:
        self.pending = None
        for unused in self.unused.stepped(optimizer, user_location(sys._getframe(1))):
            self._judge_unused(unused)

    def on_resume(self, boundary: bool) -> None:
        self.pending = None  # a zero_grad noted before settled steps is no longer pending
        self.discards_now.clear()
        self.unused.clear(boundary)

    def _judge_unused(self, unused: Unused) -> None:
        """A backward whose gradients a ``zero_grad`` discarded before any step used them, the
        next backward now running: reported at that backward's line the second time (at
        another step) that line is found wasted."""
        if unused.zeroed_at is not None and unused.zeroed_at[:2] in self.discards:
            return  # the same loss judged at that zero_grad (a local loss inside forward)
        key = unused.where[:2]
        first = self.wasted.get(key)
        if first is None:
            self.wasted[key] = self.state.step
            self.hold()  # check the next steps in full: one more is needed
            return
        if first in (-1, self.state.step):
            return
        self.wasted[key] = -1
        count = f"{unused.reached} parameter{'s' if unused.reached != 1 else ''}"
        self.report(
            f"this backward runs after {unused.step_name}.step() "
            f"({short_location(unused.step_at, 'line unknown')}) and adds onto the gradients "
            f"that step has already used; {unused.zeroed_name}.zero_grad() "
            f"({short_location(unused.zeroed_at, 'line unknown')}) clears them before any step "
            f"uses what it added, so this loss never moves the {count} it reaches (seen again "
            f"at optimizer step {self.state.step})",
            fix="call optimizer.step() after the last backward of the iteration (below this "
                "one), or add this loss to the one backpropagated before the step",
            where=unused.where)

    def _judge_discard(self, optimizer: Any, discard: "_Discard", held: set[int],
                       caller: Any) -> None:
        """A step after a zero_grad that threw away a backward's gradients and a backward since:
        when the zeroed parameters are this optimizer's (sampled) ones, unchanged since, and the
        backward that filled the discarded gradients is written where the backward that fills
        the step's gradients is (the same micro-batch code, run again), note it; the second
        step at which the same zero_grad does this is reported at that zero_grad."""
        state = self.state
        if state.backward_count <= discard.backwards:
            return
        # a backward since the zero_grad written where the discarded one is (the same
        # micro-batch code run again; a debug helper's backward on a copy of the model may come
        # after it); else another loss: a probe before training, a GAN's other player
        since = [b for b in state.backwards if b.index >= discard.backwards]
        again = any(b.where is not None and b.where[:2] == discard.backward_at[:2]
                    and not b.retain_graph for b in since)
        params = [r() for r in discard.params]
        if any(p is None or id(p) not in held for p in params):
            return  # the zeroed parameters are not (all) this optimizer's
        if any(p._version != v for p, v in zip(params, discard.versions)):
            return  # the parameters were moved in between (a hand-written SAM ascent step)
        if not again and not _lost(optimizer, discard, params, held):
            return  # another loss refilled them: a probe before training, a GAN's other player
        if again and self._remainder(optimizer, discard):
            return  # an epoch's partial accumulation dropped; every step sees a full one
        key = discard.where[:2]
        first = self.discards.get(key)
        if first is None:
            self.discards[key] = state.step
            self.hold()  # check the next steps in full: one more is needed
            return
        if first == state.step:
            return
        backwards = state.backward_count - state.backwards_at_step
        line = discard.backward_at[1]
        where, through = _call_cause(discard.stack, caller, discard.where, discard.backward_at)
        if not again:
            self.report(
                f"{discard.owner_name}.zero_grad() {through}ran after a backward and before "
                f"{type(optimizer).__name__}.step(): it discarded the gradients the backward at "
                f"line {line} had put into parameters that no later backward reaches (still "
                f"zero at step {state.step + 1}), so the step never moves them: they learn "
                "nothing (e.g. a local loss backpropagated inside forward, then zeroed)",
                fix="call zero_grad() before the first backward of the step (or after "
                    "optimizer.step()), not between a backward and the step",
                where=where)
            self.discards[key] = -1
            return
        self.report(
            f"{discard.owner_name}.zero_grad() {through}ran after a backward and before "
            f"{type(optimizer).__name__}.step(), with another backward in between: it discarded "
            f"the gradients the backward at line {line} had just accumulated, so each "
            f"optimizer step (step {state.step + 1} here, {backwards} backward calls since the "
            "last one) learns only from the last of them",
            fix="call zero_grad() once per optimizer step, after step() (or before the first "
                "micro-batch's backward), not before every backward of an accumulation loop",
            where=where)
        self.discards[key] = -1  # reported: the same place is merged by the bus from now on

    def _remainder(self, optimizer: Any, discard: "_Discard") -> bool:
        """Whether the discard drops only the remainder of a declared accumulation (zeroing at
        the top of each epoch, the micro-batches after the epoch's last step thrown away, as
        Lightning-AI/pytorch-lightning#19987 lists among the choices): this optimizer's last
        two uncut steps each followed the same number of backward calls, the zero_grad threw away
        fewer than that, and the step now follows exactly that many since it. A zero_grad
        before every micro-batch leaves no step uncut (no regular count), and a global counter
        whose step comes early after the epoch's zero_grad (fewer backward calls since it) is
        still reported."""
        count, agreed = self.regular.get(id(optimizer), (0, False))
        after = self.state.backward_count - discard.backwards
        return agreed and discard.discarded < count and after == count


def _lost(optimizer: Any, discard: "_Discard", params: list[Any], held: set[int]) -> bool:
    """Whether the discarded gradients are lost for good: the zero_grad covered every parameter
    of the stepping optimizer (its own, or a model holding them all: not a part zeroed on
    purpose), and a sampled parameter whose gradient it cleared (not zero then) still has none
    (None or zeros) at the step: no backward since reached it."""
    owner = discard.owner()
    if owner is None or owner is not optimizer and \
            not held <= {id(p) for p in zeroed_by(owner)}:
        return False
    grads = [p.grad for p, filled in zip(params, discard.filled) if filled]
    return readable(*(g for g in grads if g is not None)) and any(
        g is None or not bool(g.any()) for g in grads)


def _call_cause(stack: Any, step_caller: Any, where: Any, backward_at: Any) -> tuple[Any, str]:
    """Where to report a zero_grad that ran between a backward and the step, and how the message
    names it. When it ran inside a user function (a gradient logger, a callback) that the frame
    running the step called between the backward and the step, the call in that frame is the
    line to move: the helper is right when called after the step. Stays at the zero_grad itself
    when the two share no frame, when the step is reached through the same call (a
    ``train_step()`` helper doing all three), or when the helper also ran the backward (its own
    order is wrong). A hook dispatched to each callback of a list is followed into the callback
    (``callstack.cause_line``)."""
    step_stack = user_stack(step_caller)
    depth = shared_depth(stack, step_stack)
    if (depth < 0 or depth + 1 >= len(stack) or stack[depth][2] == step_stack[depth][2]
            or any(_runs(entry[1], backward_at) for entry in stack[depth + 1:])):
        return where, "here "
    cause = cause_line(stack, step_stack, past_dispatch=True) or where
    if cause[:2] == where[:2]:
        return where, "here "
    return cause, f"(at {short_location(where)}, reached through this call) "


def _runs(code: Any, where: Any) -> bool:
    """Whether the line ``where`` belongs to the function ``code``."""
    return where is not None and code.co_filename == where[0] and any(
        line == where[1] for _, _, line in code.co_lines())


def _own_method(caller: Any, owner: Any) -> bool:
    """Whether the zero_grad was called by a method of ``owner`` itself (``self.zero_grad()``
    inside an optimizer's own ``first_step``, in the user's file or a library's: part of its
    algorithm, not of the training loop). Looks at the frames from the call out to the first
    user frame (a few at most), trainguard's own left out."""
    frame = caller
    for _ in range(8):
        if frame is None:
            return False
        code = frame.f_code
        if not is_trainguard_file(code.co_filename):
            if code.co_argcount and code.co_varnames[0] == "self" \
                    and frame.f_locals.get("self") is owner:
                return True
            if is_user_code(code):
                return False
        frame = frame.f_back
    return False


class _Discard:
    """A zero_grad that threw away gradients a backward since the last step had filled."""

    __slots__ = ("owner", "owner_name", "params", "versions", "where", "backward_at",
                 "backwards", "filled", "discarded", "stack")

    def __init__(self, owner: Any, params: list[Any], where: Any, backward_at: Any,
                 backwards: int, filled: list[bool], discarded: int, stack: Any) -> None:
        self.filled = filled  # per sampled parameter: its gradient was not all zero
        self.owner = weakref.ref(owner)
        self.owner_name = type(owner).__name__
        self.params = [weakref.ref(p) for p in params]
        self.versions = [p._version for p in params]
        self.where = where  # the zero_grad's line
        self.backward_at = backward_at  # the line of the backward whose gradients it discarded
        self.backwards = backwards  # backward calls completed at the zero_grad
        self.discarded = discarded  # backward calls since the last step that it threw away
        self.stack = stack  # the zero_grad's user frames (callstack.user_stack)
