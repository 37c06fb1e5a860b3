"""Which name a loss call is given, and what else its function does with that name: the source
facts behind where TG406 reports a sigmoid fed to a with-logits loss, and what it advises."""

from __future__ import annotations

import ast
import functools
from typing import Any

from trainguard.apifacts import activation_of_itself, named_as_logits
from trainguard.sanitize.core.source import SourceFile, last_assigned

__all__ = ["reused_input", "rebound_by_sigmoid"]

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _loss_input_name(where: tuple[str, int, int] | None) -> tuple[Any, ast.Call, str] | None:
    """``(file, call, name)`` for the loss call at ``where`` given a plain name first."""
    if where is None:
        return None
    file = SourceFile.load(where[0])
    call = file.call_at(where[1], where[2] - 1) if file is not None else None
    if call is None or not call.args or not isinstance(call.args[0], ast.Name):
        return None
    return file, call, call.args[0].id


def _rebound_by_sigmoid(file: Any, call: ast.Call, name: str) -> bool:
    return activation_of_itself(last_assigned(file.scope(call), name, call.lineno, (ast.Call,)),
                                name, "sigmoid", "expit")


@functools.lru_cache(maxsize=64)
def rebound_by_sigmoid(where: tuple[str, int, int] | None) -> str | None:
    """The name a loss call at ``where`` is given first when the sigmoid rebound that very name
    from the logits it held (``x = torch.sigmoid(x)``), else None."""
    found = _loss_input_name(where)
    return found[2] if found is not None and _rebound_by_sigmoid(*found) else None


@functools.lru_cache(maxsize=64)
def reused_input(where: tuple[str, int, int] | None) -> str | None:
    """The name a loss call at ``where`` is given as its first argument, when other statements of
    its function read that name too (``probs`` fed to the loss and used for ``p_t``), unless the
    name says logits (``pred_logits``: its author meant raw scores, ``named_as_logits``) or held
    them until the sigmoid rebound it (``x = torch.sigmoid(x)``: the scores are lost); None."""
    found = _loss_input_name(where)
    if found is None:
        return None
    file, call, name = found
    if named_as_logits(name) or _rebound_by_sigmoid(file, call, name):
        return None
    scope = file.scope(call)
    stmt: ast.AST = call
    while stmt in file.parents and not isinstance(stmt, ast.stmt):
        stmt = file.parents[stmt]
    inside = {id(n) for n in ast.walk(stmt)}
    # (not a name read in a function or class the scope defines: a model's ``forward``)
    inside |= {id(n) for d in ast.walk(scope) if d is not scope and isinstance(d, _DEFS)
               for n in ast.walk(d)}
    return name if any(isinstance(n, ast.Name) and n.id == name and
                       isinstance(n.ctx, ast.Load) and id(n) not in inside
                       for n in ast.walk(scope)) else None
