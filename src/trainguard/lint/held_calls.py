"""Which library function a call runs when the called name holds a function value.

A training step often calls a function it was handed rather than one it names: a callback's
``self.grad_clip_fn(model.parameters())`` with ``grad_clip_fn`` given at construction
(``OptimizerCallback(grad_clip_fn=functools.partial(clip_grad_norm_, max_norm=1.0))``), or a
helper's ``clip(params)`` parameter. :func:`held_qualname` follows the value to what it was
built from: an assignment, a parameter bound at every call site (``__init__``: every
instantiation), an attribute set in the class, ``functools.partial(f, ...)`` and
``lambda ps: f(ps, ...)``. A ``None`` default is no function and is passed over; when the values
disagree or one cannot be followed, the answer is ``None`` and a check stays silent.
"""

from __future__ import annotations

import ast
import weakref

from trainguard.lint.astutil import dotted
from trainguard.lint.script import Script

__all__ = ["held_qualname", "local_assignments"]

_PARTIAL = {"functools.partial", "partial"}
# script -> (id(class or function node), kind) -> attr or name -> the values assigned to it there
_ASSIGNMENTS: "weakref.WeakKeyDictionary[Script, dict[tuple, dict[str, list[ast.expr]]]]" = \
    weakref.WeakKeyDictionary()


def held_qualname(script: Script, func: ast.expr, *, depth: int = 4) -> str | None:
    """The qualified name of the one function ``func`` (a called name or ``self`` attribute)
    holds, or None."""
    if depth <= 0:
        return None
    found: set[str | None] = set()
    values = _values(script, func)
    for v in values:
        if isinstance(v, ast.Constant) and v.value is None:
            continue
        found.add(_value_qualname(script, v, depth - 1))
        if len(found) > 1 or None in found:
            return None
    return found.pop() if found else None


def _values(script: Script, func: ast.expr) -> list[ast.expr]:
    """What ``func`` may hold: its assignments, and a parameter's arguments at every call."""
    graph = script.graph
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
            func.value.id == "self":
        cls = script.enclosing_class(func)
        if cls is None:
            return []
        return list(_self_assignments(script, cls).get(func.attr, ()))
    if not isinstance(func, ast.Name):
        return []
    scope = script.enclosing_function(func)
    if scope is not None:
        bound = graph.parameter_values(scope, func.id)
        if bound is not None:
            return bound
        local = local_assignments(script, scope).get(func.id)
        if local:
            return list(local)
    return list(script.assignments.get(func.id, []))


def _self_assignments(script: Script, cls: ast.AST) -> dict[str, list[ast.expr]]:
    """``attr -> values`` of every ``self.attr = value`` in ``cls`` (read once per class)."""
    return _assignments(script, cls, "self")


def local_assignments(script: Script, scope: ast.AST) -> dict[str, list[ast.expr]]:
    """``name -> values`` of every ``name = value`` in ``scope`` (read once per function)."""
    return _assignments(script, scope, "name")


def _assignments(script: Script, node: ast.AST, kind: str) -> dict[str, list[ast.expr]]:
    per_node = _ASSIGNMENTS.setdefault(script, {})
    found = per_node.get((id(node), kind))
    if found is None:
        found = per_node[(id(node), kind)] = {}
        for n in ast.walk(node):
            if not isinstance(n, ast.Assign):
                continue
            for t in n.targets:
                if kind == "name" and isinstance(t, ast.Name):
                    found.setdefault(t.id, []).append(n.value)
                elif kind == "self" and isinstance(t, ast.Attribute) and \
                        isinstance(t.value, ast.Name) and t.value.id == "self":
                    found.setdefault(t.attr, []).append(n.value)
    return found


def _value_qualname(script: Script, value: ast.expr, depth: int) -> str | None:
    if isinstance(value, ast.Call) and value.args and \
            (dotted(value.func) in _PARTIAL or script.qualname(value.func) in _PARTIAL):
        return _value_qualname(script, value.args[0], depth)
    if isinstance(value, ast.Lambda) and isinstance(value.body, ast.Call):
        return script.call_qualname(value.body)
    if isinstance(value, (ast.Name, ast.Attribute)):
        q = script.qualname(value)
        if q and q.startswith("torch."):
            return q
        if isinstance(value, ast.Name) and value.id in script.functions:
            return None  # a function of the file: its calls are followed as a call
        return held_qualname(script, value, depth=depth)
    return None
