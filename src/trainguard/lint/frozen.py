"""Models a file freezes whole: every parameter set to ``requires_grad=False``.

``teacher.requires_grad_(False)``, or a loop over ``m.parameters()`` that sets
``p.requires_grad = False`` on each (https://pytorch.org/docs/stable/notes/autograd.html
"Setting requires_grad"): such a model records no graph for its parameters and is not
meant to learn. Used by TG103 (a frozen model's forwards need no ``no_grad``) and TG205 (a
frozen model reached only through ``no_grad`` or a cut is not starved of gradients).
"""

from __future__ import annotations

import ast

from trainguard.lint.astutil import dotted, is_false, iterated_literal
from trainguard.lint.script import Script

__all__ = ["frozen_models", "freezing_calls", "freezing_loops"]


def frozen_models(script: Script) -> set[str]:
    """Keys of models whose every parameter is frozen: ``m.requires_grad_(False)``, or a loop
    over ``m.parameters()`` that sets ``requires_grad = False`` (or ``requires_grad_(False)``)
    on each, unconditionally."""
    if "requires_grad" not in script.source:
        return set()
    out = {k for _, k in freezing_calls(script)}
    for loop, k in freezing_loops(script):
        out.add(k)
        # (``for net in (generator, assessor):`` freezes each model of the literal)
        out.update(m for e in iterated_literal(loop, k) or () if (m := script.key(e)))
    return out


def freezing_calls(script: Script) -> list[tuple[ast.Call, str]]:
    """``m.requires_grad_(False)``: each such call, with ``m``'s key."""
    if "requires_grad" not in script.source:
        return []
    return [(node, k) for node in script.nodes
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and
            node.func.attr == "requires_grad_" and node.args and is_false(node.args[0]) and
            (k := script.key(node.func.value))]


def freezing_loops(script: Script) -> list[tuple[ast.For, str]]:
    """``for p in m.parameters(): p.requires_grad = False``: each such loop, with ``m``'s key."""
    if "requires_grad" not in script.source:
        return []
    out = []
    for node in script.nodes:
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and \
                isinstance(node.iter, ast.Call) and isinstance(node.iter.func, ast.Attribute) and \
                node.iter.func.attr == "parameters":
            k = script.key(node.iter.func.value)
            p = node.target.id
            if k and any(_freezes(s, p) for s in node.body):
                out.append((node, k))
    return out


def _freezes(stmt: ast.stmt, p: str) -> bool:
    """``p.requires_grad = False`` or ``p.requires_grad_(False)`` as a statement of the loop
    body itself (not under an ``if``: that freezes only some)."""
    if isinstance(stmt, ast.Assign) and is_false(stmt.value):
        return any(isinstance(t, ast.Attribute) and t.attr == "requires_grad" and
                   dotted(t.value) == p for t in stmt.targets)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        f = stmt.value.func
        return isinstance(f, ast.Attribute) and f.attr == "requires_grad_" and \
            dotted(f.value) == p and bool(stmt.value.args) and is_false(stmt.value.args[0])
    return False
