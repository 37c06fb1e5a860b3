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
        if value is None:  # loss, logs = compute_loss(...): the returned tuple's part
            unpacked = _unpacked_call(expr.id, at)
            if unpacked is not None:
                parts = _returned_terms(script, *unpacked, depth - 1)
                if len(parts) > 1:
                    return parts
    if isinstance(expr, ast.Call) and depth > 0:
        parts = _returned_terms(script, expr, None, depth - 1)
        if len(parts) > 1:
            return parts
    return [(expr, at)]


def _returned_terms(script: Script, call: ast.Call, index: int | None,
                    depth: int) -> list[tuple[ast.AST, ast.AST]]:
    """The terms of what the same-file function ``call`` runs returns (its ``index``-th part
    when it returns a tuple), over all its ``return`` statements: a term of any of them is a
    term on that path (``if phase == 1: return a + b`` beside ``return b + penalty``)."""
    called = script.targets(call)
    if len(called) != 1 or called[0].script is not script or called[0].instance:
        return []
    out: list[tuple[ast.AST, ast.AST]] = []
    for r in walk_local(called[0].func):
        if not isinstance(r, ast.Return) or r.value is None:
            continue
        value = r.value
        if index is not None:
            if not isinstance(value, ast.Tuple) or len(value.elts) <= index:
                return []
            value = value.elts[index]
        out.extend(p for p in summed_terms(script, value, r, depth=depth)
                   if not any(p[0] is q[0] for q in out))
    return out


def _unpacked_call(name: str, at: ast.AST) -> tuple[ast.Call, int] | None:
    """``(call, i)`` for ``a, name = call(...)`` (a flat tuple target), the last such binding
    of ``name`` above ``at`` in its scope."""
    from trainguard.lint.dataflow import scope_of, tuple_assignments

    best = None
    for line, target, value in tuple_assignments(scope_of(at)).get(name, ()):
        if isinstance(value, ast.Call) and line < at.lineno and \
                not any(isinstance(e, ast.Starred) for e in target.elts) and \
                (best is None or line > best[0]):  # type: ignore[attr-defined]
            idx = next(i for i, e in enumerate(target.elts)
                       if isinstance(e, ast.Name) and e.id == name)
            best = (line, value, idx)
    return (best[1], best[2]) if best is not None else None


def _number(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and \
        not isinstance(node.value, bool)


def _self_referencing(value: ast.AST, name: str) -> bool:
    """``loss = loss + term``: an accumulation, whose earlier value is another matter."""
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(value))
