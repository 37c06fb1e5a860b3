"""What activation produced a value: ``softmax``, ``log_softmax`` or ``sigmoid``, followed through
names, ``nn.Softmax()`` modules, ``nn.Sequential`` heads and the ``forward`` of same-file models."""

from __future__ import annotations

import ast
from typing import Literal

from trainguard.lint.dataflow import last_assignment
from trainguard.lint.script import Script

__all__ = ["activation_of", "Activation"]

Activation = Literal["softmax", "log_softmax", "sigmoid"]
_FUNCS: dict[str, Activation] = {
    "torch.softmax": "softmax", "torch.nn.functional.softmax": "softmax",
    "torch.special.softmax": "softmax",
    "torch.log_softmax": "log_softmax", "torch.nn.functional.log_softmax": "log_softmax",
    "torch.sigmoid": "sigmoid", "torch.nn.functional.sigmoid": "sigmoid",
    "torch.special.expit": "sigmoid",
}
_METHODS: dict[str, Activation] = {"softmax": "softmax", "log_softmax": "log_softmax",
                                   "sigmoid": "sigmoid"}
_MODULES: dict[str, Activation] = {"torch.nn.Softmax": "softmax", "torch.nn.LogSoftmax":
                                   "log_softmax", "torch.nn.Sigmoid": "sigmoid"}


def activation_of(script: Script, expr: ast.AST, *,
                  depth: int = 4) -> tuple[Activation, ast.AST] | None:
    """The last activation applied to ``expr``'s value and the node that applied it, or None."""
    if depth <= 0:
        return None
    if isinstance(expr, ast.Name):
        value = last_assignment(expr.id, expr)
        return activation_of(script, value, depth=depth - 1) if value is not None else None
    if not isinstance(expr, ast.Call):
        return None
    q = script.call_qualname(expr) or ""
    if q in _FUNCS:
        return _FUNCS[q], expr
    f = expr.func
    if isinstance(f, ast.Attribute) and f.attr in _METHODS and not q.startswith("torch."):
        return _METHODS[f.attr], expr
    if isinstance(f, ast.Call) and script.call_qualname(f) in _MODULES:
        return _MODULES[script.call_qualname(f) or ""], expr
    key = script.key(f)
    if key:
        for value in script.assignments.get(key, []):
            q2 = script.call_qualname(value) or ""
            if q2 in _MODULES:
                return _MODULES[q2], expr
            if q2 == "torch.nn.Sequential" and isinstance(value, ast.Call) and value.args:
                last = value.args[-1]
                if script.call_qualname(last) in _MODULES:
                    return _MODULES[script.call_qualname(last) or ""], expr
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
                    value.func.id in script.classes:
                return _from_forward(script, script.classes[value.func.id], expr, depth)
    return None


def _from_forward(script: Script, cls: ast.ClassDef, call: ast.AST,
                  depth: int) -> tuple[Activation, ast.AST] | None:
    forward = next((b for b in cls.body if isinstance(b, ast.FunctionDef)
                    and b.name == "forward"), None)
    if forward is None:
        return None
    returns = [n for n in ast.walk(forward) if isinstance(n, ast.Return) and n.value is not None]
    kinds = {activation_of(script, r.value, depth=depth - 1) and
             activation_of(script, r.value, depth=depth - 1)[0] for r in returns}  # type: ignore
    if len(kinds) == 1 and None not in kinds:
        return kinds.pop(), call  # type: ignore[return-value]
    return None
