"""Context managers the file defines: what entering one does.

``with eval_mode(model):`` over a ``@contextmanager`` generator runs the generator's
statements up to its ``yield`` on entry, with grad mode as it is at the ``yield`` (``with
torch.no_grad(): yield``); over a class, its ``__enter__`` (``self._no_grad.__enter__()``)
(https://docs.python.org/3/library/contextlib.html#contextlib.contextmanager).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from trainguard.lint.astutil import SCOPES, dotted, mode_switch, parent
from trainguard.lint.callgraph import bind_arguments
from trainguard.lint.events import Event, events

if TYPE_CHECKING:
    from trainguard.lint.script import Script

__all__ = ["entry_events", "entry_statements", "enters_no_grad"]


def _generator(script: Script, call: ast.AST) -> tuple[ast.FunctionDef, ast.Yield] | None:
    """The same-file ``@contextmanager`` function ``call`` runs, and its one ``yield``."""
    if not isinstance(call, ast.Call):
        return None
    funcs = script.functions.get(dotted(call.func) or "", [])
    func = funcs[0] if len(funcs) == 1 else None
    if not isinstance(func, ast.FunctionDef) or not any(
            (dotted(d) or "").endswith("contextmanager") for d in func.decorator_list):
        return None
    found = [n for n in _walk_own(func) if isinstance(n, (ast.Yield, ast.YieldFrom))]
    return (func, found[0]) if len(found) == 1 and isinstance(found[0], ast.Yield) else None


def _walk_own(func: ast.AST) -> list[ast.AST]:
    out, todo = [], list(ast.iter_child_nodes(func))
    while todo:
        n = todo.pop()
        if not isinstance(n, SCOPES):
            out.append(n)
            todo.extend(ast.iter_child_nodes(n))
    return out


def entry_statements(script: Script, call: ast.AST) -> tuple[list[ast.stmt], dict[str, str]]:
    """The statements a ``@contextmanager`` generator runs before its ``yield`` (outermost
    first, ``try``/``with`` bodies entered), and its parameters renamed to the caller's keys
    (``model`` -> ``net`` for ``eval_mode(net)``); nothing for anything else."""
    found = _generator(script, call)
    if found is None:
        return [], {}
    func, yielded = found
    blocks: list[list[ast.stmt]] = []
    n: ast.AST = yielded
    while (p := parent(n)) is not None and n is not func:
        for field in ("body", "orelse", "finalbody"):
            block = getattr(p, field, None)
            if isinstance(block, list) and n in block:
                blocks.append(block[:block.index(n)])
        n = p
    stmts = [s for block in reversed(blocks) for s in block]
    names = [a.arg for a in func.args.args]
    rename = {k: key for k, v in bind_arguments(names, call).items()  # type: ignore[arg-type]
              if (key := script.key(v)) is not None}
    return stmts, rename


def enters_no_grad(script: Script, call: ast.AST, depth: int = 0) -> bool:
    """Entering ``call``'s context disables grad: a ``@contextmanager`` generator whose
    ``yield`` sits in ``with torch.no_grad():``, or one (or a same-file class's ``__enter__``)
    that enters a no-grad context by hand (``self._ctx.__enter__()`` on ``self._ctx =
    torch.no_grad()``) or calls ``torch.set_grad_enabled(False)``."""
    found = _generator(script, call)
    if found is not None:
        n: ast.AST = found[1]
        while (n := parent(n)) is not None and n is not found[0]:  # type: ignore[assignment]
            if isinstance(n, ast.With) and any(
                    script.grad_context(i.context_expr, depth) for i in n.items):
                return True
        stmts = entry_statements(script, call)[0]
    else:
        enter = _method(script, call, "__enter__")
        stmts = enter.body if enter is not None else []
    return any(_disables(script, s, depth) for s in stmts)


def _disables(script: Script, stmt: ast.stmt, depth: int) -> bool:
    c = stmt.value if isinstance(stmt, ast.Expr) else None
    if not isinstance(c, ast.Call):
        return False
    if isinstance(c.func, ast.Attribute) and c.func.attr == "__enter__":
        values = script.assignments.get(script.key(c.func.value) or "", [])
        return bool(values) and all(script.grad_context(v, depth) for v in values)
    return bool(script.grad_context(c, depth))


def _method(script: Script, call: ast.AST, name: str) -> ast.FunctionDef | None:
    """Method ``name`` of the same-file class ``call`` builds."""
    cls = script.classes.get(dotted(call.func) or "") if isinstance(call, ast.Call) else None
    return next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == name),
                None) if cls is not None else None


def entry_events(script: Script, call: ast.AST) -> list[Event]:
    """The training events of entering ``call``'s context, in the caller's names: a generator's
    statements before its ``yield``; a class's ``__enter__`` switching the mode of a model its
    ``__init__`` keeps (``self.model = model``, then ``self.model.eval()``)."""
    if _generator(script, call) is not None:
        stmts, rename = entry_statements(script, call)
        return events(script, stmts, rename=rename, via=call)  # type: ignore[arg-type]
    enter, init = _method(script, call, "__enter__"), _method(script, call, "__init__")
    if enter is None or init is None:
        return []
    bound = bind_arguments([a.arg for a in init.args.args[1:]], call)  # type: ignore[arg-type]
    held = {}
    for stmt in init.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
                isinstance(stmt.value, ast.Name) and stmt.value.id in bound and \
                (key := script.key(bound[stmt.value.id])) is not None:
            held[script.key(stmt.targets[0])] = key  # self.model = model
    out = []
    for stmt in enter.body:
        c = stmt.value if isinstance(stmt, ast.Expr) else None
        mode = mode_switch(c) if isinstance(c, ast.Call) else None
        key = held.get(script.key(c.func.value)) if mode else None  # type: ignore[union-attr]
        if key is not None:
            kind = {"eval": "eval", "train": "train"}.get(mode or "", "mode?")
            out.append(Event(kind, key, c, via=call))  # type: ignore[arg-type]
    return out
