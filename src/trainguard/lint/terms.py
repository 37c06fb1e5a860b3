"""The summed terms of a loss: ``loss = policy_loss + 0.5 * value_loss`` is two terms.

Autograd adds the gradients of the terms of a sum; a term that reaches a model only through a
cut (``.item()``, ``.detach()``, a new tensor from Python numbers) contributes none, whatever
the other terms do. Terms are found through ``+``, ``-``, unary minus, scaling by a number
and ``.mean()``/``.sum()`` of a sum, and through plain names assigned once before in the same
function (``policy_loss = ...``), and through what a helper of the same file returns
(``loss = a2c_loss(net, batch)`` returning ``policy + 0.5 * value``); anything else is one
term.
"""

from __future__ import annotations

import ast

from trainguard.lint.astutil import walk_local
from trainguard.lint.dataflow import last_assignment
from trainguard.lint.script import Script

__all__ = ["summed_terms"]

_LINEAR = {"mean", "sum"}


def summed_terms(script: Script, expr: ast.AST, at: ast.AST, *,
                 depth: int = 4) -> list[tuple[ast.AST, ast.AST]]:
    """(term, where it is read) for the terms of the sum ``expr`` read at ``at``."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
        return summed_terms(script, expr.left, at, depth=depth) + \
            summed_terms(script, expr.right, at, depth=depth)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        return summed_terms(script, expr.operand, at, depth=depth)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Mult, ast.Div)):
        if _number(expr.right):
            return summed_terms(script, expr.left, at, depth=depth)
        if isinstance(expr.op, ast.Mult) and _number(expr.left):
            return summed_terms(script, expr.right, at, depth=depth)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and \
            expr.func.attr in _LINEAR and not expr.args and not expr.keywords and \
            isinstance(expr.func.value, (ast.BinOp, ast.UnaryOp)):
        inner = summed_terms(script, expr.func.value, at, depth=depth)
        if len(inner) > 1:
            return inner
    if isinstance(expr, ast.Name) and isinstance(expr.ctx, ast.Load) and depth > 0:
        value = last_assignment(expr.id, at)
        if isinstance(value, (ast.BinOp, ast.UnaryOp, ast.Call)) and \
                not _self_referencing(value, expr.id):
            parts = summed_terms(script, value, value, depth=depth - 1)
            if len(parts) > 1:
                return parts
    if isinstance(expr, ast.Call) and depth > 0:
        called = script.targets(expr)
        if len(called) == 1 and called[0].script is script and not called[0].instance:
            rets = [n for n in walk_local(called[0].func) if isinstance(n, ast.Return)]
            if len(rets) == 1 and rets[0].value is not None:
                parts = summed_terms(script, rets[0].value, rets[0], depth=depth - 1)
                if len(parts) > 1:
                    return parts
    return [(expr, at)]


def _number(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and \
        not isinstance(node.value, bool)


def _self_referencing(value: ast.AST, name: str) -> bool:
    """``loss = loss + term``: an accumulation, whose earlier value is another matter."""
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(value))
