"""How many samples a dataset holds, when the file fixes it.

``TensorDataset(torch.randn(N, 8), y)`` holds ``N`` samples; so do ``x[:N]``,
``torch.arange(N)``, ``np.random.rand(N, 3)``, a ``Dataset`` whose ``__len__`` returns ``N``,
``torch.cat([a, b])`` (their sum) and each part of ``random_split(ds, [a, b])``, with ``N``
computed by :func:`trainguard.lint.consts.const_eval` (module constants, arithmetic, a
function's arguments at one call site). Anything else is unknown. Nothing is run.
"""

from __future__ import annotations

import ast
from typing import Any

from trainguard.lint.astutil import dotted, kwarg
from trainguard.lint.consts import UNKNOWN, const_eval
from trainguard.lint.script import Script

__all__ = ["samples"]

_SIZED = {"randn", "rand", "zeros", "ones", "empty", "full", "randint"}
_SAME_LENGTH = {"to", "float", "long", "double", "half", "int", "cuda", "cpu", "clone", "detach",
                "contiguous", "unsqueeze", "squeeze", "requires_grad_", "astype", "copy"}


def samples(script: Script, expr: ast.AST | None, env: dict[str, ast.expr] | None = None, *,
            depth: int = 6) -> Any:
    """The number of samples (first dimension) of ``expr``, or ``UNKNOWN``."""
    if expr is None or depth <= 0:
        return UNKNOWN
    d = depth - 1
    if isinstance(expr, ast.Name):
        if env and expr.id in env:
            return samples(script, env[expr.id], None, depth=d)
        value = _one_value(script, expr)
        if value is None:
            return _split_part(script, expr, d)
        return samples(script, value, env, depth=d)
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Slice):
        sl = expr.slice
        if sl.step is not None:
            return UNKNOWN
        total = samples(script, expr.value, env, depth=d)
        lo = 0 if sl.lower is None else const_eval(sl.lower, env=env)
        hi = total if sl.upper is None else const_eval(sl.upper, env=env)
        if not all(isinstance(v, int) for v in (lo, hi)):
            return UNKNOWN
        if (lo < 0 or hi < 0) and not isinstance(total, int):
            return UNKNOWN
        n = total if isinstance(total, int) else max(lo, hi)
        return len(range(n)[lo:hi])
    if not isinstance(expr, ast.Call):
        return UNKNOWN
    q = script.call_qualname(expr) or ""
    name = q.rsplit(".", 1)[-1]
    f = expr.func
    if name == "TensorDataset" and expr.args:
        return samples(script, expr.args[0], env, depth=d)
    if isinstance(f, ast.Attribute) and f.attr in _SAME_LENGTH:
        return samples(script, f.value, env, depth=d)
    if q.startswith(("torch.", "numpy.")) and name in _SIZED:
        size = kwarg(expr, "size")
        if size is None and name == "randint":  # randint(high, size) / randint(low, high, size)
            size = next((a for a in reversed(expr.args) if isinstance(a, (ast.Tuple, ast.List))),
                        None)
        elif size is None and expr.args:
            size = expr.args[0]
        v = const_eval(size, env=env)
        if isinstance(v, list) and v and isinstance(v[0], int):
            return v[0]
        if isinstance(v, int) and not isinstance(v, bool) and name != "randint":
            return v
        return UNKNOWN
    if q in ("torch.arange", "numpy.arange") and expr.args and not expr.keywords:
        vals = [const_eval(a, env=env) for a in expr.args]
        if all(isinstance(v, int) for v in vals):
            return len(range(*vals))
        return UNKNOWN
    if q in ("torch.cat", "numpy.concatenate") and expr.args and \
            isinstance(expr.args[0], (ast.List, ast.Tuple)) and \
            const_eval(kwarg(expr, "dim") or kwarg(expr, "axis") or ast.Constant(0)) == 0 and \
            len(expr.args) == 1:
        parts = [samples(script, e, env, depth=d) for e in expr.args[0].elts]
        return sum(parts) if all(isinstance(p, int) for p in parts) else UNKNOWN
    return _dataset_class_length(script, expr)


def _one_value(script: Script, name: ast.Name) -> ast.expr | None:
    from trainguard.lint.consts import _single_value

    return _single_value(name)


def _split_part(script: Script, name: ast.Name, depth: int) -> Any:
    """``train_ds, val_ds = random_split(ds, [900, 125])``: the part bound to ``name``."""
    from trainguard.lint.dataflow import scope_of

    scope = scope_of(name)
    for node in ast.walk(scope):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and
                isinstance(node.targets[0], ast.Tuple) and isinstance(node.value, ast.Call)):
            continue
        if not (script.call_qualname(node.value) or "").endswith("random_split"):
            continue
        names = [e.id if isinstance(e, ast.Name) else None for e in node.targets[0].elts]
        if name.id not in names:
            continue
        lengths = node.value.args[1] if len(node.value.args) > 1 else kwarg(node.value, "lengths")
        v = const_eval(lengths)
        if isinstance(v, list) and len(v) == len(names) and all(isinstance(x, int) for x in v):
            return v[names.index(name.id)]
        return UNKNOWN
    return UNKNOWN


def _dataset_class_length(script: Script, call: ast.Call) -> Any:
    """A same-file ``Dataset`` class whose ``__len__`` returns a constant."""
    cls = script.classes.get(dotted(call.func) or "")
    if cls is None:
        return UNKNOWN
    for b in cls.body:
        if isinstance(b, ast.FunctionDef) and b.name == "__len__":
            rets = [r for r in ast.walk(b) if isinstance(r, ast.Return)]
            if len(rets) == 1:
                v = const_eval(rets[0].value)
                return v if isinstance(v, int) else UNKNOWN
    return UNKNOWN
