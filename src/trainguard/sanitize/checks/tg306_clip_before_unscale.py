"""TG306 clip-before-unscale: gradients clipped while a ``GradScaler`` still has them scaled.

What it watches: ``torch.nn.utils.clip_grad_norm_``/``clip_grad_value_`` calls (made through the
``torch.nn.utils`` module attribute) and, at each of them, the live enabled ``GradScaler`` (found
once with ``gc`` at the first clip of the run; a run without one costs nothing more): which
optimizers it has unscaled in this step. At the next ``optimizer.step()``: whether the clipped
tensors are that optimizer's.

When it fires: the last backward before the clip ran from a loss scaled by that ``GradScaler``
(its root is ``loss * scale``: a ``MulBackward0`` node whose saved factor is the scaler's own
scale tensor, read with one attribute access per backward whose root is a product), the clipped
parameters belong to the optimizer about to step, and the scaler had not unscaled that
optimizer's gradients when they were clipped: the threshold was compared with
gradients multiplied by the scale (65536 at the start), so clipping cuts almost every step to a
tiny update, or, with ``clip_grad_value_``, to a fixed sign step. Reported at the clip, or, when
it runs in a helper, at the line that led to it in the deepest frame that also ran the scaled
backward (the stack of each backward whose root is a product is kept): the call to move after
``unscale_`` (rwth-i6/returnn#1595); at the clip when one line there led to both (a library's
``fit()`` calling the user's clipping hook).

Also fires when the clip is the user's own code (adaptive gradient clipping, a hand-written global
norm, ``p.grad.clamp_``): after each checked backward from a scaled loss, the first 4096 elements
of three of each optimizer's gradients are copied; when ``unscale_`` comes (the user's call, or
the one ``scaler.step`` makes) and those gradients were changed in place since, by factors in
(0, 1) that differ between elements (a threshold) or a uniform factor that differs from the last
step's, the clip met scaled gradients. Reported at the user's ``unscale_`` call, or, when
``scaler.step`` unscaled them, at the scaled backward (the fix goes right after it).

Silent on: ``scaler.unscale_(optimizer)`` before clipping (the AMP recipe), clipping without a
``GradScaler`` or with a disabled one, clipping another model's unscaled gradients while a
scaler exists, a GAN whose other optimizer's gradients are unscaled and
clipped in turn, gradients divided by one constant before unscaling (accumulation), and masks
(gradient rows zeroed, the rest kept: the same on scaled and unscaled gradients).

Not seen: clipping functions imported by name before the watcher started
(``from torch.nn.utils import clip_grad_norm_``).

Cost: per checked backward, one look at its root's node (when it is a product by a scalar, the
user's stack; with an enabled scaler, three gradient slices copied); per checked clip, a set of
the clipped parameter ids (one scan of the heap for GradScalers per run,
``bounds.live_objects``); 16 pending clips at most.

Reference: "Automatic Mixed Precision examples: Gradient clipping"
https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-clipping; GitHub issue
https://github.com/princeton-vl/RAFT/issues/104 (a loop in the right order).
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from trainguard.sanitize.core.bounds import live_objects
from trainguard.sanitize.core.callstack import cause_line, shared_depth, user_stack
from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.frames import short_location, user_location


class ClipBeforeUnscale(Check):
    code = "TG306"
    on_demand = ("on_step_pre", "on_step")  # only while a clip of scaled gradients is pending

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        # weakrefs to the enabled GradScalers alive when first needed (one heap scan per run;
        # a notebook's kernel may hold an earlier cell's scaler too)
        self.scalers: list[Any] | None = None
        # (param ids, unscaled, where, name): where is the clip's line, or the line that led to
        # it in the frame that also ran the scaled backward
        self.clips: list[tuple[set[int], set[int], Any, str]] = []
        self.backward_stack: Any = ()  # the user's stack of the last backward of a product
        self.scaled_by: int | None = None  # data_ptr of the factor of the last backward's Mul root
        # id(optimizer) -> [(weakref(grad), version, first elements, backward_count)] after the
        # latest scaled backward; id(optimizer) -> the uniform factor last seen before unscale_
        self.snaps: dict[int, list] = {}
        self.factors: dict[int, float] = {}

    def on_backward(self, call: Any) -> None:
        roots = call.tensors
        node = roots[0].grad_fn if len(roots) == 1 else None
        self.backward_stack = ()
        if node is None or type(node).__name__ != "MulBackward0":
            self.scaled_by = None
            return
        try:
            other = node._saved_other
        except (AttributeError, RuntimeError):
            self.scaled_by = None
            return
        self.scaled_by = other.data_ptr() if other.numel() == 1 else None
        if self.scaled_by is not None:
            self.backward_stack = user_stack(sys._getframe(1))

    def on_backward_done(self, call: Any) -> None:
        """After a backward the scaler scaled: note a few gradients of each optimizer as they
        stand (tensor, version, their first elements), to see them changed before unscale_."""
        self.snaps = {}
        if self._scaling() is None:
            return
        for optimizer in list(self.state.optimizers):
            with_grad = [p for g in optimizer.param_groups for p in g["params"]
                         if p.grad is not None]
            picked = sorted({0, len(with_grad) // 2, len(with_grad) - 1}) if with_grad else []
            self.snaps[id(optimizer)] = [
                (weakref.ref(with_grad[i].grad), with_grad[i].grad._version,
                 with_grad[i].grad.detach().flatten()[:_SNAP].float().clone(),
                 self.state.backward_count) for i in picked]

    def on_unscale(self, scaler: Any, optimizer: Any, by_user: bool) -> None:
        """Report gradients shrunk in place between the scaled backward and ``unscale_``: at the
        user's ``unscale_`` call (to move up), or, when ``scaler.step`` unscaled them, at the
        backward (``unscale_`` goes right after it)."""
        snaps = self.snaps.pop(id(optimizer), ())
        mine = {id(p) for g in optimizer.param_groups for p in g["params"]} if snaps else set()
        if any(c[0] & mine for c in self.clips):
            return  # a clip_grad_* call of these gradients is pending: reported at that call
        for ref, version, old, backward in snaps:
            grad = ref()
            if grad is None or grad._version == version or backward != self.state.backward_count:
                continue
            new = grad.detach().flatten()[:_SNAP].float()
            factor = _shrink(old, new)
            if factor is None or factor == 1.0:
                continue
            last, self.factors[id(optimizer)] = self.factors.get(id(optimizer)), factor
            if factor >= 0 and (last is None or abs(last - factor) <= 1e-3 * abs(last)):
                continue  # one constant factor (gradients divided by the accumulation steps)
            where = user_location(sys._getframe(1))
            after = self.state.last_backward_where() if not by_user else None
            self.report(
                f"{type(optimizer).__name__}'s gradients were shrunk in place (clipped: "
                f"{'unit by unit' if factor < 0 else 'by a factor that changes'}) after "
                + ("this scaled backward, before scaler.unscale_ (which scaler.step at "
                   f"{short_location(where)} then called)" if after is not None else
                   "the scaled backward and before scaler.unscale_ here")
                + f": the threshold met gradients multiplied by the scale "
                f"({scaler.get_scale():g}), so the clipping is far stronger than intended",
                fix="call scaler.unscale_(optimizer) right after backward, before any clipping "
                    "or other change of the gradients",
                where=after or where)
            return

    def _scaling(self) -> Any:
        """The enabled ``GradScaler`` whose scale the last backward's loss was multiplied by
        (the scalers are looked up once); None otherwise (no scaler, disabled, or an unscaled
        backward). Matched by the scale tensor itself, not taken as the first one alive."""
        if self.scaled_by is None:
            return None
        if self.scalers is None:
            self.scalers = [weakref.ref(s) for s in _find_scalers()]
        for ref in self.scalers:
            scaler = ref()
            scale = getattr(scaler, "_scale", None) if scaler is not None else None
            if scale is not None and scaler.is_enabled() and scale.data_ptr() == self.scaled_by:
                return scaler
        return None

    def on_clip(self, name: str, params: list) -> None:
        scaler = self._scaling()
        if scaler is None:
            return  # no enabled scaler, or gradients from a backward it did not scale
        unscaled = {oid for oid, st in scaler._per_optimizer_states.items()
                    if getattr(st.get("stage"), "name", "") == "UNSCALED"}
        clip_at = user_location(sys._getframe(1))
        where = _clip_cause(user_stack(sys._getframe(1)), self.backward_stack)
        if where is not None and clip_at is not None and where[:2] != clip_at[:2]:
            name = f"{name} (at {short_location(clip_at)}, reached through this call)"
        self.clips.append(({id(p) for p in params}, unscaled, where or clip_at, name))
        self.arm()

    def on_step_pre(self, optimizer: Any) -> None:
        if not self.clips:
            return
        mine = {id(p) for g in optimizer.param_groups for p in g["params"]}
        for ids, unscaled, where, name in self.clips:
            if ids & mine and id(optimizer) not in unscaled:
                self.report(
                    f"{name} clipped {type(optimizer).__name__}'s gradients while the GradScaler "
                    "still had them multiplied by its scale: the threshold was applied to scaled "
                    "gradients, so the clipping is far stronger than intended",
                    fix="call scaler.unscale_(optimizer) right before clipping, then "
                        "scaler.step(optimizer) and scaler.update()",
                    where=where)
        self.clips = [c for c in self.clips if not (c[0] & mine)]

    def on_step(self, optimizer: Any) -> None:
        if len(self.clips) > 16:
            del self.clips[:-16]
        if not self.clips:
            self.disarm()


_SNAP = 4096  # elements of a gradient compared


def _shrink(old: Any, new: Any) -> float | None:
    """How ``new`` shrank ``old`` in place: None if not a shrink (a sign flipped, a value grew:
    an all-reduce, noise), the factor when every element was multiplied by one, -1.0 when the
    factors differ (a threshold: some values cut, others kept or cut less)."""
    live = old != 0
    if not bool(live.any()) or bool((new[~live] != 0).any()):
        return None
    r = new[live] / old[live]
    if bool((r < 0).any()) or bool((r > 1 + 1e-4).any()) or \
            not bool(((r > 1e-6) & (r < 1 - 1e-4)).any()):
        return None  # (values only kept or zeroed: a mask, not a clip)
    lo, hi = float(r.min()), float(r.max())
    return hi if hi - lo <= 1e-4 * max(hi, 1e-12) else -1.0


def _clip_cause(clip_stack: Any, backward_stack: Any) -> Any:
    """The line to move after ``unscale_``: in the deepest frame that ran both the scaled backward
    and the clip, the line that led to the clip (the call of a clipping helper, or the clip
    itself); None when the stacks share no frame, or when one line there led to both (a trainer's
    ``fit()`` that runs the backward and calls the user's clipping hook: the clip's own line)."""
    depth = shared_depth(clip_stack, backward_stack)
    if depth < 0 or clip_stack[depth][2] == backward_stack[depth][2]:
        return None
    return cause_line(clip_stack, backward_stack)


def _find_scalers() -> list[Any]:
    try:
        from torch.amp import GradScaler
    except ImportError:
        return []
    return [obj for obj in live_objects(lambda o: GradScaler in type(o).__mro__)
            if obj.is_enabled()]
