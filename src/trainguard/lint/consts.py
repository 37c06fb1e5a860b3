"""A small constant evaluator: the value of an expression when the file fixes it.

``N = 1025``, ``EPOCHS = 10; milestones=[int(0.6 * EPOCHS)]``, ``cfg = {"train": {"bs": 64}}``
then ``cfg["train"]["bs"]``, ``len([...])``: numbers, strings, lists, tuples and dicts built from
literals, arithmetic, ``int``/``float``/``round``/``min``/``max``/``abs``/``len``, subscripts, and
names assigned exactly once (in the function, else at module level) and never changed in place.
Anything else is unknown (``...``). Nothing is run.
"""

from __future__ import annotations

import ast
import operator
from typing import Any

from trainguard.lint.astutil import SCOPES, children, dotted, parent

__all__ = ["const_eval", "UNKNOWN"]

UNKNOWN: Any = ...
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
           ast.Pow: operator.pow}
_FUNCS = {"int": int, "float": float, "round": round, "min": min, "max": max, "abs": abs,
          "len": len}


def const_eval(expr: ast.AST | None, *, _depth: int = 8) -> Any:
    """The value of ``expr`` if the source fixes it, else ``UNKNOWN`` (``...``)."""
    if expr is None or _depth <= 0:
        return UNKNOWN
    d = _depth - 1
    try:
        if isinstance(expr, ast.Constant):
            return expr.value
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
            v = const_eval(expr.operand, _depth=d)
            return UNKNOWN if not _number(v) else (-v if isinstance(expr.op, ast.USub) else v)
        if isinstance(expr, ast.BinOp) and type(expr.op) in _BINOPS:
            a, b = const_eval(expr.left, _depth=d), const_eval(expr.right, _depth=d)
            if _number(a) and _number(b) and abs(b) < 1e6:
                return _BINOPS[type(expr.op)](a, b)
            if isinstance(expr.op, ast.Mult) and isinstance(a, list) and isinstance(b, int) \
                    and b < 1000:
                return a * b
            return UNKNOWN
        if isinstance(expr, (ast.List, ast.Tuple)):
            vals = [const_eval(e, _depth=d) for e in expr.elts]
            return UNKNOWN if any(v is UNKNOWN for v in vals) else list(vals)
        if isinstance(expr, ast.Dict):
            out = {}
            for k, v in zip(expr.keys, expr.values):
                key = const_eval(k, _depth=d) if k is not None else UNKNOWN
                if key is UNKNOWN:
                    continue  # a ** spread or a computed key: that entry is unknown
                out[key] = const_eval(v, _depth=d)
            return out
        if isinstance(expr, ast.Subscript):
            base = const_eval(expr.value, _depth=d)
            key = const_eval(expr.slice, _depth=d)
            if isinstance(base, dict) and not isinstance(key, (list, dict)) and key in base:
                return base[key]
            if isinstance(base, list) and isinstance(key, int) and -len(base) <= key < len(base):
                return base[key]
            return UNKNOWN
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and \
                expr.func.id in _FUNCS and not expr.keywords:
            args = [const_eval(a, _depth=d) for a in expr.args]
            if args and all(a is not UNKNOWN for a in args):
                return _FUNCS[expr.func.id](*args)
            return UNKNOWN
        if isinstance(expr, ast.Call) and dotted(expr.func) in ("dict",) and not expr.args:
            return {k.arg: const_eval(k.value, _depth=d) for k in expr.keywords if k.arg}
        if isinstance(expr, ast.Name):
            value = _single_value(expr)
            return const_eval(value, _depth=d) if value is not None else UNKNOWN
        if isinstance(expr, ast.Attribute):  # cfg.epochs on a SimpleNamespace/dataclass: unknown
            return UNKNOWN
    except (ArithmeticError, TypeError, ValueError, OverflowError):
        return UNKNOWN
    return UNKNOWN


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _single_value(name: ast.Name) -> ast.expr | None:
    """The one value ``name`` is ever given in its function, else at module level."""
    scope = parent(name)
    while scope is not None and not isinstance(scope, (*SCOPES, ast.Module)):
        scope = parent(scope)
    while scope is not None:
        table = _assignment_table(scope)
        if name.id in table:
            values = table[name.id]
            return values[0] if len(values) == 1 else None
        if isinstance(scope, ast.Module):
            return None
        scope = parent(scope)
        while scope is not None and not isinstance(scope, (*SCOPES, ast.Module)):
            scope = parent(scope)
    return None


def _assignment_table(scope: ast.AST) -> dict[str, list[ast.expr | None]]:
    """name -> every value bound to it in ``scope`` (None for a binding that is not a plain
    assignment: a loop target, a parameter, ``+=``, an in-place method like ``.append``)."""
    table = getattr(scope, "_tg_const_table", None)
    if table is not None:
        return table
    table = {}
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = scope.args
        for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
            if arg is not None:
                table.setdefault(arg.arg, []).append(None)
    stack = list(children(scope))
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    table.setdefault(t.id, []).append(n.value)
                else:
                    for sub in ast.walk(t):
                        if isinstance(sub, ast.Name):
                            table.setdefault(sub.id, []).append(None)
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            table.setdefault(n.target.id, []).append(n.value)
        elif isinstance(n, (ast.AugAssign, ast.For, ast.AsyncFor, ast.comprehension)):
            for sub in ast.walk(n.target):
                if isinstance(sub, ast.Name):
                    table.setdefault(sub.id, []).append(None)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            for name in n.names:
                table.setdefault(name, []).append(None)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                isinstance(n.func.value, ast.Name) and n.func.attr in (
                    "append", "extend", "update", "pop", "insert", "setdefault", "clear"):
            table.setdefault(n.func.value.id, []).append(None)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            table.setdefault(n.name, []).append(None)
        if not isinstance(n, SCOPES):
            stack.extend(children(n))
    scope._tg_const_table = table  # type: ignore[attr-defined]
    return table
