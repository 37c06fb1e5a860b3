"""A backward whose gradients no step uses before the next iteration's zeroing wipes them.

``optimizer.step()`` right after the first loss's backward, and a second loss's backward into
the same model after it, with nothing stepping that model again before ``optimizer.zero_grad()``
at the top of the next iteration: the second loss never changes the parameters
(https://pytorch.org/docs/stable/optim.html#taking-an-optimization-step). Which models a
backward reaches is read from what its loss is computed from in the iteration (names assigned
in the loop, not through ``.detach()``), less the models whose parameters were set to
``requires_grad = False`` before it (an adversarial loss through a frozen discriminator). A
GAN's generator backward reaches the discriminator too, but the generator's step after it uses
its gradients: a step after the backward of any optimizer it feeds keeps it silent.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import SCOPES, dotted, is_false, is_true, parent, walk_local
from trainguard.lint.dataflow import CUTS
from trainguard.lint.events import Event
from trainguard.lint.optimizers import cleared, held_modules
from trainguard.lint.script import Script

__all__ = ["late_backwards"]


def late_backwards(script: Script, loop: ast.AST, evs: list[Event]
                   ) -> Iterator[tuple[Event, str, Event, Event]]:
    """(backward, optimizer, its last step before the backward, the zeroing that wipes the
    backward's gradients) for each backward at the top level of ``loop``'s body whose
    gradients reach only optimizers that stepped before it in the iteration."""
    holders = {e.key: held_modules(script, e.key) for e in evs if e.kind == "step" and e.key}
    if len(holders) != len({e.key for e in evs if e.kind == "step"}) or \
            any(h is None for h in holders.values()):
        return  # an optimizer whose models the file does not show
    for i, b in enumerate(evs):
        if b.kind != "backward" or b.foreign or not _top_level(b.node, loop):
            continue
        live = _reached(script, loop, b.node) - _frozen_at(script, loop, b.node)
        fed = {k for k, held in holders.items() if held and any(_same(m, h) for m in live
                                                                 for h in held)}
        later = evs[i + 1:]
        if not fed or any(e.kind == "step" and e.key in fed or
                          e.kind in ("setgrad", "clip", "unscale") for e in later) or \
                _reads_grad_after(loop, b.node):
            continue
        for key in sorted(fed):
            before = [e for e in evs[:i] if e.kind == "step" and e.key == key]
            wipe = next((e for e in later + evs[:i] if e.kind == "step" and e.key == key or
                         e.kind == "zero" and cleared(script, e.key, key) is None), None)
            if before and wipe is not None and wipe.kind == "zero" and not wipe.foreign and \
                    _top_level(wipe.node, loop):
                yield b, key, before[-1], wipe
                break


def _top_level(node: ast.AST, loop: ast.AST) -> bool:
    """``node`` runs once in every pass: no ``if``, loop or function between it and ``loop``."""
    cur = parent(node)
    while cur is not None and cur is not loop:
        if isinstance(cur, (ast.If, ast.For, ast.While, ast.AsyncFor, ast.IfExp, ast.Try,
                            *SCOPES)):
            return False
        cur = parent(cur)
    return cur is loop


def _same(mention: str, held: str) -> bool:
    return mention == held or held.startswith(mention + ".") or mention.startswith(held + ".")


def _reached(script: Script, loop: ast.AST, backward: ast.Call) -> set[str]:
    """The names and attribute chains the loss of ``backward`` is computed from in the loop:
    the receiver, and what the names it reads were assigned above it in the loop body, not
    through a cut (``fake.detach()``, ``loss.item()``)."""
    f = backward.func
    if not isinstance(f, ast.Attribute):
        return set()
    line = backward.lineno
    assigned: dict[str, list[ast.expr]] = {}
    for sub in walk_local(loop):
        if isinstance(sub, ast.Assign) and sub.lineno < line:
            for t in sub.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        assigned.setdefault(n.id, []).append(sub.value)
    seen: set[str] = set()
    todo: list[ast.expr] = [f.value]
    while todo:
        for n in _uncut(todo.pop()):
            d = dotted(n)
            if d is None or d in seen or "(" in d or "[" in d:
                continue
            seen.add(d)
            if isinstance(n, ast.Name):
                todo.extend(assigned.get(n.id, []))
    return {d for d in seen if d != "self"}


def _uncut(expr: ast.AST) -> Iterator[ast.AST]:
    """Names and attribute chains read in ``expr``, outside ``.detach()`` and other cuts."""
    if isinstance(expr, ast.Attribute) and expr.attr in CUTS:
        return
    if isinstance(expr, (ast.Name, ast.Attribute)):
        yield expr
    for child in ast.iter_child_nodes(expr):
        yield from _uncut(child)


def _frozen_at(script: Script, loop: ast.AST, at: ast.AST) -> set[str]:
    """Models whose parameters the loop body last set to ``requires_grad = False`` above
    ``at``: ``for p in disc.parameters(): p.requires_grad = False``, ``disc.requires_grad_(
    False)``, or a helper named for it (``set_requires_grad(disc, False)``)."""
    state: dict[str, bool] = {}
    toggles = sorted((n for n in walk_local(loop) if getattr(n, "lineno", at.lineno) <
                      at.lineno), key=lambda n: (n.lineno, n.col_offset))  # type: ignore
    for node in toggles:
        for key, value in _toggle(script, node):
            state[key] = value
    return {k for k, v in state.items() if not v}


def _toggle(script: Script, node: ast.AST) -> Iterator[tuple[str, bool]]:
    if isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and \
            isinstance(node.iter.func, ast.Attribute) and node.iter.func.attr == "parameters" \
            and isinstance(node.target, ast.Name):
        key = script.key(node.iter.func.value)
        for s in node.body:
            if key and isinstance(s, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and t.attr == "requires_grad" and
                    dotted(t.value) == node.target.id for t in s.targets) and \
                    (is_false(s.value) or is_true(s.value)):
                yield key, is_true(s.value)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == "requires_grad_":
        key = script.key(node.func.value)
        flag = node.args[0] if node.args else ast.Constant(True)
        if key and (is_false(flag) or is_true(flag)):
            yield key, is_true(flag)
    elif isinstance(node, ast.Call) and "requires_grad" in (dotted(node.func) or "") and \
            len(node.args) == 2 and (is_false(node.args[1]) or is_true(node.args[1])):
        models = node.args[0].elts if isinstance(node.args[0], (ast.List, ast.Tuple)) else \
            [node.args[0]]
        for m in models:
            if (key := script.key(m)) is not None:
                yield key, is_true(node.args[1])


def _reads_grad_after(loop: ast.AST, at: ast.AST) -> bool:
    """The iteration reads ``.grad`` after ``at``: the backward was for those gradients."""
    return any(isinstance(n, ast.Attribute) and n.attr == "grad" and
               n.lineno > at.lineno for n in walk_local(loop))  # type: ignore[attr-defined]
