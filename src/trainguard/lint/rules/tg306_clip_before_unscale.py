"""TG306 clip-before-unscale: with a ``GradScaler``, gradients clipped before ``unscale_``.

Gradients from ``scaler.scale(loss).backward()`` are multiplied by the loss scale (65536 at
first); clipping them before ``scaler.unscale_(optimizer)`` applies the threshold to the scaled
values (https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-clipping).
"""

from __future__ import annotations

from collections.abc import Iterator

from trainguard.lint.events import events
from trainguard.lint.regions import training_loops
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script

CODE = "TG306"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    if not script.scalers:
        return
    for loop in training_loops(script):
        evs = events(script, loop.body)  # type: ignore[attr-defined]
        uses_scaler = any(e.kind == "step" and (script.key(e.node.func.value) or "")  # type: ignore
                          in script.scalers for e in evs)
        if not uses_scaler:
            continue
        unscaled = False
        for e in evs:
            if e.kind == "backward":
                unscaled = False
            elif e.kind == "unscale":
                unscaled = True
            elif e.kind == "clip" and not unscaled:
                yield Hit(e.node,
                          "gradients are clipped while still multiplied by the GradScaler's "
                          "loss scale: the threshold applies to scaled gradients",
                          fix="call scaler.unscale_(optimizer) before clipping")
                break
