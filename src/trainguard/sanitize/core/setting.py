"""The user's line that set a number passed to a constructor: the learning rate of an optimizer
(TG405 reports a diverged run there), and whether a run diverged. Read from the source
(``bounds.parse_file``), once, on the rare path after a finding."""

from __future__ import annotations

import ast
import math
import sys
from typing import Any

from trainguard.sanitize.core.bounds import parse_file

__all__ = ["DIVERGED_FIX", "argument_line", "diverged", "learning_rate_line"]

DIVERGED_FIX = ("lower the learning rate, normalize the inputs and regression targets (zero mean, "
                "unit variance), or clip gradients")
"""The fix of a run whose loss diverged before it overflowed."""

_DIVERGED_AT = 1e6  # a finite loss this large before the overflow: the run diverged
_DIVERGED_GROWTH = 1e3  # ... or one that grew this much since the first step


def diverged(first: Any, latest: Any, where: Any) -> str:
    """The loss's growth before it overflowed, as a clause, when it grew by 1000x or beyond 1e6;
    else "". ``first``/``latest``: ``(step, value, backward line)`` of the first and the latest
    finite loss, or None; only losses of the backward line ``where`` are compared (a GAN's two
    losses are not). The caller leaves out scaled losses (a GradScaler changes them by design)."""
    if first is None or latest is None:
        return ""
    (s0, v0, w0), (s1, v1, w1) = first, latest
    if not w0 == w1 == where:
        return ""
    if abs(v1) < _DIVERGED_AT and abs(v1) < _DIVERGED_GROWTH * max(abs(v0), 1e-12):
        return ""
    if s0 == s1:
        return f", after a loss of {v1:.3g} at step {s1}: training diverged"
    return (f", after the loss grew from {v0:.3g} at step {s0} to {v1:.3g} at step {s1}: "
            "training diverged")


def learning_rate_line(built: list[tuple[Any, Any]]) -> Any:
    """The user's line that set the learning rate of the latest optimizer in ``built`` (pairs of
    a weak reference to an optimizer and the line that built it) still alive, or None."""
    for ref, where in reversed(built):
        optimizer = ref()
        if optimizer is not None and optimizer.param_groups:
            group = optimizer.param_groups[0]
            lr = group.get("initial_lr", group.get("lr"))
            if isinstance(lr, (int, float)):
                return argument_line(where, "lr", 1, float(lr)) or where
    return None


def argument_line(where: Any, keyword: str, position: int, value: float) -> Any:
    """The user's ``(path, line, col)`` that set the value of argument ``keyword`` (or positional
    ``position``) of the call at ``where`` (an optimizer's construction, ``lr=...``): the literal
    in the call itself, or, when the call passes a name (``lr=cfg["lr"]``, ``args.lr``, ``LR``),
    the line of the same file (then of ``__main__``'s) that gives that name the number ``value``:
    a dict entry, an assignment, a class field, ``add_argument("--lr", default=...)``. None when
    none is found."""
    tree = parse_file(where[0]) if where else None
    given = None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Call) and node.lineno <= where[1] <= (node.end_lineno or 0):
            arg = next((k.value for k in node.keywords if k.arg == keyword), None)
            if arg is None and len(node.args) > position \
                    and not isinstance(node.args[position], ast.Starred):
                arg = node.args[position]
            if arg is not None and (given is None or node.lineno >= given.lineno):
                given = arg
    if given is None:
        return None
    if _is_number(given, value):
        return (where[0], given.lineno, given.col_offset + 1)
    names = {n.id for n in ast.walk(given) if isinstance(n, ast.Name)}
    names |= {n.attr for n in ast.walk(given) if isinstance(n, ast.Attribute)}
    names |= {n.value for n in ast.walk(given) if isinstance(n, ast.Constant)
              and isinstance(n.value, str)}
    files = [where[0]]
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    if main and main not in files:
        files.append(main)
    for path in files:
        tree = parse_file(path)
        for node in ast.walk(tree) if tree is not None else ():
            found = _sets(node, names, value)
            if found is not None:
                return (path, found.lineno, found.col_offset + 1)
    return None


def _is_number(node: Any, value: float) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _is_number(node.operand, -value)
    return (isinstance(node, ast.Constant) and isinstance(node.value, (int, float))
            and not isinstance(node.value, bool) and math.isclose(node.value, value, rel_tol=1e-9))


def _sets(node: Any, names: set[str], value: float) -> Any:
    """The value node by which ``node`` gives one of ``names`` the number ``value``, or None."""
    if isinstance(node, ast.Dict):
        for key, item in zip(node.keys, node.values):
            if isinstance(key, ast.Constant) and key.value in names and _is_number(item, value):
                return item
    elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        named = {t.id for t in targets if isinstance(t, ast.Name)}
        named |= {t.attr for t in targets if isinstance(t, ast.Attribute)}
        if named & names and _is_number(node.value, value):
            return node.value
    elif isinstance(node, ast.Call):
        flags = {a.value.lstrip("-").replace("-", "_") for a in node.args
                 if isinstance(a, ast.Constant) and isinstance(a.value, str)}
        for k in node.keywords:
            if (k.arg in names or (k.arg == "default" and flags & names)) \
                    and _is_number(k.value, value):
                return k.value
    return None
