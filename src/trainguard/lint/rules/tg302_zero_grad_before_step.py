"""TG302 zero-grad-before-step: gradients zeroed between ``backward()`` and ``step()``.

The step then sees zero (or ``None``) gradients and nothing learns. Only a zeroing that concerns
the stepped optimizer counts: the same optimizer, ``p.grad = None``, or ``model.zero_grad()`` when
the loop steps a single optimizer (several optimizers: a GAN zeroes one while stepping another).
A zeroing on a path that leaves the iteration (``continue``, ``return``, ``raise``) is silent.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import parent
from trainguard.lint.events import Event, events
from trainguard.lint.regions import training_loops
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script

CODE = "TG302"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    for loop in training_loops(script):
        evs = events(script, loop.body)  # type: ignore[attr-defined]
        steppers = {e.key for e in evs if e.kind == "step"}
        for i, e in enumerate(evs):
            if e.kind != "zero" or _leaves_iteration(e.node, loop):
                continue
            before = [x.kind for x in evs[:i] if x.kind in ("backward", "step")]
            if not before or before[-1] != "backward":
                continue
            step = _next_step(evs[i + 1:])
            if step is None or not _related(script, e, step, steppers):
                continue
            if not e.foreign and not step.foreign and _exclusive(e.node, step.node):
                continue  # `if frozen: zero_grad() else: step()` never runs both
            yield Hit(e.node,
                      f"gradients are zeroed at {e.place(script)} after backward() and before "
                      f"{step.key or 'the optimizer'}.step() at {step.place(script)}: the step "
                      f"sees no gradients",
                      fix="move zero_grad() before backward() or after step()")


def _next_step(evs: list[Event]) -> Event | None:
    for e in evs:
        if e.kind in ("backward", "setgrad"):
            return None  # new gradients (a backward, or set by hand) before the step
        if e.kind == "step":
            return e
    return None


def _related(script: Script, zero: Event, step: Event, steppers: set[str | None]) -> bool:
    if zero.key in ("*", step.key):
        return True
    return len(steppers) == 1 and script.is_model(zero.key)


def _leaves_iteration(node: ast.AST, loop: ast.AST) -> bool:
    n = node
    while (p := parent(n)) is not None and p is not loop:
        if isinstance(p, (ast.If, ast.ExceptHandler)):
            block = p.body if n in getattr(p, "body", []) else getattr(p, "orelse", [])
            if any(isinstance(s, (ast.Continue, ast.Return, ast.Raise, ast.Break))
                   for s in block):
                return True
        n = p
    return False


def _branches(node: ast.AST) -> dict[int, str]:
    out = {}
    n = node
    while (p := parent(n)) is not None:
        if isinstance(p, ast.If):
            out[id(p)] = "body" if n in p.body else "orelse" if n in p.orelse else "test"
        n = p
    return out


def _exclusive(a: ast.AST, b: ast.AST) -> bool:
    """``a`` and ``b`` sit in opposite branches of one ``if``."""
    ba, bb = _branches(a), _branches(b)
    return any(k in bb and ba[k] != bb[k] for k in ba)
