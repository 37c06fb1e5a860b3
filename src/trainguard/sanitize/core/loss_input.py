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
_SIGMOIDS = ("sigmoid", "expit")


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
                       isinstance(n.ctx, ast.Load) and id(n) not in inside and
                       not _read_as_logits(file, n) for n in ast.walk(scope)) else None


def _sigmoid_of(file: Any, read: ast.Name) -> bool:
    """``read`` is what a sigmoid is applied to (``torch.sigmoid(p)``, ``p.sigmoid()``)."""
    parent = file.parents.get(read)
    if isinstance(parent, ast.Call) and parent.args and parent.args[0] is read:
        return ast.unparse(parent.func).split(".")[-1] in _SIGMOIDS
    return isinstance(parent, ast.Attribute) and parent.attr == "sigmoid" and \
        isinstance(file.parents.get(parent), ast.Call)


def _read_as_logits(file: Any, read: ast.Name) -> bool:
    """Whether ``read`` treats the value as logits: a sigmoid is applied to it again, directly or
    by a function of the same file it is handed to whose parameter is only ever passed to a
    sigmoid (an accuracy helper's ``torch.round(torch.sigmoid(preds))``). Such a use does not
    need the probabilities: it applies the sigmoid a second time too."""
    if _sigmoid_of(file, read):
        return True
    call = file.parents.get(read)
    if not isinstance(call, ast.Call) or not any(a is read for a in call.args):
        return False
    found = _same_file_function(file, call)
    if found is None:
        return False
    function, skip = found
    params = function.args.posonlyargs + function.args.args
    index = skip + next(i for i, a in enumerate(call.args) if a is read)
    if index >= len(params):
        return False
    param = params[index].arg
    reads = [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == param and
             isinstance(n.ctx, ast.Load)]
    return bool(reads) and all(_sigmoid_of(file, n) for n in reads)


def _same_file_function(file: Any, call: ast.Call) -> tuple[ast.AST, int] | None:
    """``(def, parameters to skip)`` of the function ``call`` calls when it is defined in the same
    file: a module-level ``helper(...)`` (0), or ``self.helper(...)`` of the enclosing class (1)."""
    func, owner = call.func, None
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
            func.value.id == "self":
        owner, name, skip = ast.ClassDef, func.attr, 1
    elif isinstance(func, ast.Name):
        owner, name, skip = ast.Module, func.id, 0
    else:
        return None
    holder: Any = file.parents.get(call)
    while holder is not None and not isinstance(holder, owner):
        holder = file.parents.get(holder)
    if holder is None:
        return None
    return next(((d, skip) for d in holder.body if isinstance(d, ast.FunctionDef)
                 and d.name == name), None)
