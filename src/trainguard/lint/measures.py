"""Functions that measure a model: they hand back a loss on labelled data as a plain number.

``def labelled_loss(self, x, y): with torch.no_grad(): out = self.net(x); return
F.cross_entropy(out, y).item()`` scores the model, whatever it is called and wherever it is
called (a Meta Pseudo Labels trainer computes the student's loss on labelled data before and
after its step and rewards the teacher with the difference: kekmodel/MPL-pytorch#9). A Python
number carries no graph: what is computed from it may be backpropagated (a reward scaling a
loss), the measurement itself is not part of training. :func:`metric_number` finds the other
numbers a function hands back from its forwards (an accuracy, a mean error).
"""

from __future__ import annotations

import ast

from trainguard.lint.astutil import walk_local
from trainguard.lint.callgraph import returned_values
from trainguard.lint.dataflow import is_loss_call, last_assignment
from trainguard.lint.script import Script

__all__ = ["returns_number", "loss_number", "metric_number"]

_TO_NUMBER = frozenset({"item", "tolist"})


def returns_number(func: ast.AST) -> bool:
    """Every ``return`` of ``func`` hands back a plain number (``loss.item()``,
    ``float(loss)``): nothing it returns carries a graph."""
    values = returned_values(func)  # type: ignore[arg-type]
    return bool(values) and all(_number(v) is not None for v in values)


def loss_number(script: Script, func: ast.AST, forwards: list[ast.Call]) -> bool:
    """Every ``return`` of ``func`` hands back, as a plain number, a loss computed from the
    output of one of ``forwards`` and another tensor (the labels):
    ``F.cross_entropy(logits, y).item()``, also through a name bound in ``func``; or a tuple
    of plain numbers that holds one (``return loss.item(), acc.item()``, or a metric a
    function of the file computes as a number: ``rank_corr(pred, y)``)."""
    values = returned_values(func)  # type: ignore[arg-type]
    if not values or not forwards:
        return False
    for value in values:
        parts = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
        if not any(_loss_of(script, p, forwards) for p in parts) or \
                not all(_plain_number(script, p) for p in parts):
            return False
    return True


def metric_number(func: ast.AST, forwards: list[ast.Call]) -> bool:
    """Every ``return`` of ``func`` hands back plain numbers (or a tuple of them), at least one
    computed from the output of one of ``forwards``: ``correct / len(x)`` where ``correct +=
    (model(xb).argmax(1) == yb).sum().item()``, also through names bound in ``func`` (an
    accuracy, a mean absolute error). Every name the value reads is bound in ``func`` to plain
    numbers only (``.item()``, ``float(...)``, ``len(...)``, constants and arithmetic on them)."""
    values = returned_values(func)  # type: ignore[arg-type]
    if not values or not forwards:
        return False
    binds: dict[str, list[ast.expr]] = {}
    for n in walk_local(func):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and \
                isinstance(n.targets[0], ast.Name):
            binds.setdefault(n.targets[0].id, []).append(n.value)
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            binds.setdefault(n.target.id, []).append(n.value)
    fwd = {id(f) for f in forwards}
    found = []
    for value in values:
        for part in value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]:
            kind = _numeric(part, binds, fwd, set())
            if kind is None:
                return False
            found.append(kind)
    return any(found)


def _numeric(expr: ast.AST, binds: dict[str, list[ast.expr]], fwd: set[int],
             seen: set[str]) -> bool | None:
    """None when ``expr`` may be other than a plain number; else whether it holds a value
    computed from a forward's output (:func:`metric_number`)."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, (int, float)):
        return False
    inner = _number(expr)
    if inner is not None:
        return any(id(n) in fwd for n in ast.walk(inner)) or any(
            _from_named_forward(n.id, binds, fwd, set()) for n in ast.walk(inner)
            if isinstance(n, ast.Name))
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and \
            expr.func.id in ("len", "int", "round") and len(expr.args) == 1:
        return False if expr.func.id == "len" else _numeric(expr.args[0], binds, fwd, seen)
    if isinstance(expr, ast.BinOp):
        left, right = (_numeric(e, binds, fwd, seen) for e in (expr.left, expr.right))
        return None if left is None or right is None else left or right
    if isinstance(expr, ast.UnaryOp):
        return _numeric(expr.operand, binds, fwd, seen)
    if isinstance(expr, ast.Name) and expr.id in binds:
        if expr.id in seen:
            return False
        kinds = [_numeric(v, binds, fwd, seen | {expr.id}) for v in binds[expr.id]]
        return None if None in kinds else any(kinds)
    return None


def _from_named_forward(name: str, binds: dict[str, list[ast.expr]], fwd: set[int],
                        seen: set[str]) -> bool:
    """A name bound in the function to an expression that holds a forward's output
    (``pred = out.argmax(1)`` after ``out = model(x)``)."""
    if name in seen:
        return False
    for value in binds.get(name, []):
        if any(id(n) in fwd for n in ast.walk(value)) or any(
                _from_named_forward(n.id, binds, fwd, seen | {name})
                for n in ast.walk(value) if isinstance(n, ast.Name)):
            return True
    return False


def _loss_of(script: Script, value: ast.AST, forwards: list[ast.Call]) -> bool:
    """``value`` turns into a number a loss of a forward's output and another tensor."""
    inner = _number(value)
    if isinstance(inner, ast.Name):
        inner = last_assignment(inner.id, value)
    return is_loss_call(script, inner) and len(inner.args) >= 2 and \
        any(_from_forward(a, forwards) for a in inner.args)  # type: ignore[union-attr]


def _plain_number(script: Script, value: ast.AST) -> bool:
    """``value`` is a plain number: ``x.item()``, ``float(x)``, or a call of a function of the
    project whose every return is one."""
    if _number(value) is not None:
        return True
    targets = script.targets(value) if isinstance(value, ast.Call) else []
    return bool(targets) and all(returns_number(t.func) for t in targets)


def _number(value: ast.AST) -> ast.AST | None:
    """What ``value`` turns into a number (``x`` of ``x.item()``, ``float(x)``), or None."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
            value.func.attr in _TO_NUMBER and not value.args:
        return value.func.value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
            value.func.id == "float" and len(value.args) == 1:
        return value.args[0]
    return None


def _from_forward(arg: ast.AST, forwards: list[ast.Call]) -> bool:
    """``arg`` holds a forward's output: the call itself, or a name bound to an expression
    that holds it."""
    ids = {id(f) for f in forwards}
    if any(id(n) in ids for n in ast.walk(arg)):
        return True
    bound = last_assignment(arg.id, arg) if isinstance(arg, ast.Name) else None
    return bound is not None and any(id(n) in ids for n in ast.walk(bound))
