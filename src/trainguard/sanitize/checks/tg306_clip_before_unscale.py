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
tiny update, or, with ``clip_grad_value_``, to a fixed sign step.

Silent on: ``scaler.unscale_(optimizer)`` before clipping (the AMP recipe), clipping without a
``GradScaler`` or with a disabled one, clipping another model's unscaled gradients while a
scaler exists, a GAN whose other optimizer's gradients are unscaled and
clipped in turn.

Not seen: clipping functions imported by name before the watcher started
(``from torch.nn.utils import clip_grad_norm_``).

Cost: per checked backward, one look at its root's node; per checked clip, a set of the clipped
parameter ids (one scan of the heap for a GradScaler per run, ``bounds.live_objects``); 16 pending
clips at most.

Reference: "Automatic Mixed Precision examples: Gradient clipping"
https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-clipping; GitHub issue
https://github.com/princeton-vl/RAFT/issues/104 (a loop in the right order).
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from trainguard.sanitize.core.bounds import live_objects
from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.frames import user_location


class ClipBeforeUnscale(Check):
    code = "TG306"
    on_demand = ("on_step_pre", "on_step")  # only while a clip of scaled gradients is pending

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.scaler: Any = None  # weakref to the GradScaler, False when the run has none
        self.clips: list[tuple[set[int], set[int], Any, str]] = []  # (param ids, unscaled, where, name)
        self.scaled_by: int | None = None  # data_ptr of the factor of the last backward's Mul root

    def on_backward(self, call: Any) -> None:
        roots = call.tensors
        node = roots[0].grad_fn if len(roots) == 1 else None
        if node is None or type(node).__name__ != "MulBackward0":
            self.scaled_by = None
            return
        try:
            other = node._saved_other
        except (AttributeError, RuntimeError):
            self.scaled_by = None
            return
        self.scaled_by = other.data_ptr() if other.numel() == 1 else None

    def on_clip(self, name: str, params: list) -> None:
        if self.scaler is None:
            found = _find_scaler()
            self.scaler = weakref.ref(found) if found is not None else False
        scaler = self.scaler() if self.scaler else None
        if scaler is None or not scaler.is_enabled() or getattr(scaler, "_scale", None) is None:
            return
        if self.scaled_by is None or self.scaled_by != scaler._scale.data_ptr():
            return  # the gradients come from a backward the scaler did not scale
        unscaled = {oid for oid, st in scaler._per_optimizer_states.items()
                    if getattr(st.get("stage"), "name", "") == "UNSCALED"}
        self.clips.append(({id(p) for p in params}, unscaled, user_location(sys._getframe(1)), name))
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


def _find_scaler() -> Any:
    try:
        from torch.amp import GradScaler
    except ImportError:
        return None
    for obj in live_objects(lambda o: GradScaler in type(o).__mro__):
        if obj.is_enabled():
            return obj
    return None
