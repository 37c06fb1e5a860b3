"""Functions that measure a model: they hand back a loss on labelled data as a plain number.

``def labelled_loss(self, x, y): with torch.no_grad(): out = self.net(x); return
F.cross_entropy(out, y).item()`` scores the model, whatever it is called and wherever it is
called (a Meta Pseudo Labels trainer computes the student's loss on labelled data before and
after its step and rewards the teacher with the difference: kekmodel/MPL-pytorch#9). A Python
number carries no graph: what is computed from it may be backpropagated (a reward scaling a
loss), the measurement itself is not part of training.
"""

from __future__ import annotations

import ast

from trainguard.lint.callgraph import returned_values
from trainguard.lint.dataflow import is_loss_call, last_assignment
from trainguard.lint.script import Script

__all__ = ["returns_number", "loss_number"]

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
