"""Containers that keep a fixed number of entries: appending to them cannot grow memory.

``collections.deque(maxlen=N)`` drops its oldest entry when a new one is appended
(https://docs.python.org/3/library/collections.html#collections.deque), and a list trimmed as it
grows (``if len(buf) > N: buf.pop(0)``, ``del buf[0]``) keeps at most N: what either holds is a
window of the last N values, not every iteration's.
"""

from __future__ import annotations

import ast

from trainguard.lint.astutil import dotted, parent, walk_local
from trainguard.lint.script import Script

__all__ = ["bounded_container"]

_TRIMS = ("pop", "popleft")


def bounded_container(script: Script, node: ast.AST, acc: str) -> bool:
    """Whether ``acc`` (``name`` or ``self.attr``), appended to at ``node``, keeps a fixed
    number of entries: every assignment that builds it makes a ``deque`` with a ``maxlen``, or
    the function that appends to it also trims it (unconditionally, or under a test of its
    length)."""
    func = script.enclosing_function(node)
    if _trimmed(func if func is not None else script.tree, acc):
        return True
    if acc.startswith("self."):
        cls = script.enclosing_class(node)
        scope: ast.AST = cls if cls is not None else script.tree
        stmts = ast.walk(scope)
    else:
        n = parent(node)
        while n is not None and not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                   ast.Module)):
            n = parent(n)
        stmts = walk_local(n if n is not None else script.tree)
    built = [s.value for s in stmts if isinstance(s, (ast.Assign, ast.AnnAssign)) and
             s.value is not None and
             any(dotted(t) == acc for t in (s.targets if isinstance(s, ast.Assign)
                                            else [s.target]))]
    return bool(built) and all(_capped_deque(script, v) for v in built)


def _capped_deque(script: Script, value: ast.AST) -> bool:
    """``deque(maxlen=200)``, ``collections.deque([], 50)``: a maxlen that is not None."""
    if not isinstance(value, ast.Call):
        return False
    name = script.call_qualname(value) or dotted(value.func) or ""
    if name.rsplit(".", 1)[-1] != "deque":
        return False
    cap = next((k.value for k in value.keywords if k.arg == "maxlen"), None)
    if cap is None and len(value.args) >= 2:
        cap = value.args[1]
    return cap is not None and not (isinstance(cap, ast.Constant) and cap.value is None)


def _trimmed(func: ast.AST, acc: str) -> bool:
    """``acc.pop(0)``, ``acc.popleft()`` or ``del acc[...]`` in ``func``, run at every call or
    under a test (``if``/``while``) that reads ``len(acc)``."""
    for sub in walk_local(func):
        trims = isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
            sub.func.attr in _TRIMS and dotted(sub.func.value) == acc or \
            isinstance(sub, ast.Delete) and any(
                isinstance(t, ast.Subscript) and dotted(t.value) == acc for t in sub.targets)
        if trims and _capped_by_length(sub, func, acc):
            return True
    return False


def _capped_by_length(node: ast.AST, func: ast.AST, acc: str) -> bool:
    """Every ``if``/``while`` between ``node`` and ``func`` tests the length of ``acc``."""
    n = parent(node)
    while n is not None and n is not func:
        if isinstance(n, (ast.If, ast.While)) and not any(
                isinstance(c, ast.Call) and dotted(c.func) == "len" and c.args and
                dotted(c.args[0]) == acc for c in ast.walk(n.test)):
            return False
        n = parent(n)
    return True
