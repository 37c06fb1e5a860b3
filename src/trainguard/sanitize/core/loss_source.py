"""Where the statements a loss is computed from leave the graph, read from the source at an error.

Used when a backward has already failed because its root carries no ``grad_fn`` (TG204): the run
is about to die, so nothing can be traced any more, but the frame that called ``backward`` is still
alive. From the ``backward`` statement, the statements of that function that the loss depends on
are collected backwards (a slice over the names they assign and read, loops flattened), from the
model's last forward with grad enabled on (when that call is in the same function) up to the
``backward``. Each of those statements, and the user functions they call (resolved through the
frame's ``self``, locals and globals, two levels deep), is searched, in the order it runs, for a
call that leaves the graph: ``.detach()``, ``.item()``, ``.numpy()``, ``.tolist()``, ``.data``,
``argmax``/``argmin``/``argsort``, an integer cast (``.long()``, ``.int()``). The first one found
is the cut's line.

Cost: on the failed backward only, one parse of each source file involved (cached).

Reference: "Locally disabling gradient computation" and ``Tensor.detach`` in
https://pytorch.org/docs/stable/notes/autograd.html.
"""

from __future__ import annotations

import ast
from types import FrameType
from typing import Any, Iterator

from trainguard.sanitize.core.frames import Location, is_user_file
from trainguard.sanitize.core.source import function_node

__all__ = ["cut_in_source", "CUTS"]

CUTS = frozenset({"detach", "detach_", "item", "numpy", "tolist", "data", "argmax", "argmin",
                  "argsort", "long", "int", "short", "byte", "bool"})
"""Attribute names whose call (or read, for ``data``) leaves the autograd graph."""

_DEPTH = 2  # levels of user functions followed from the loss's statements


def cut_in_source(frame: FrameType, backward_line: int,
                  forward: Location | None) -> tuple[str, Location] | None:
    """``(what, location)`` of the first call that leaves the graph among the statements
    ``frame``'s ``backward`` at ``backward_line`` depends on (and the user functions they call),
    not before the model's forward at ``forward`` when it is in the same function; else None."""
    code = frame.f_code
    function = function_node(code)
    if function is None:
        return None
    statements = [s for s in _simple_statements(function) if s.lineno <= backward_line]
    last = next((s for s in reversed(statements) if s.lineno <= backward_line
                 <= (s.end_lineno or s.lineno)), None)
    if last is None:
        return None
    start = 0
    if forward is not None and forward[0] == code.co_filename:
        start = forward[1] if _inside(function, forward[1]) else 0
    resolve = _Resolver(frame)
    kept = [s for s in _slice(statements, last) if (s.end_lineno or s.lineno) >= start]
    # names read but never assigned on the way from the forward to the loss are its inputs
    # (labels, masks): their `.long()` or `.numpy()` cuts nothing the loss needed
    inputs = _names([p for s in kept for p in _header(s)], ast.Load) - \
        _names([p for s in kept for p in _header(s)], ast.Store)
    inputs = {n for n in inputs if _is_tensor(resolve.scope.get(n))}
    for statement in kept:
        found = _first_cut(statement, code.co_filename, resolve, _DEPTH, inputs)
        if found is not None:
            return found
    return None


def _inside(function: ast.AST, line: int) -> bool:
    if isinstance(function, ast.Module):
        return True
    return function.lineno <= line <= (function.end_lineno or function.lineno)


def _simple_statements(function: ast.AST) -> list[ast.stmt]:
    """The statements of ``function`` that hold no others (loops and branches flattened), in
    source order, without those of nested functions and classes."""
    out: list[ast.stmt] = []

    def visit(body: list[ast.stmt]) -> None:
        for s in body:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            inner = [getattr(s, f, []) for f in ("body", "orelse", "finalbody")]
            inner += [h.body for h in getattr(s, "handlers", [])]
            if any(inner):
                if isinstance(s, (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With)):
                    out.append(s)  # its header (the iterated value, the test) reads names too
                for body_ in inner:
                    visit(body_)
            else:
                out.append(s)

    visit(function.body)  # type: ignore[attr-defined]
    return out


def _header(statement: ast.stmt) -> list[ast.AST]:
    """The expressions a statement evaluates itself (a loop's or branch's header only)."""
    if isinstance(statement, (ast.For, ast.AsyncFor)):
        return [statement.target, statement.iter]
    if isinstance(statement, (ast.While, ast.If)):
        return [statement.test]
    if isinstance(statement, ast.With):
        return [i for item in statement.items for i in (item.context_expr, item.optional_vars)
                if i is not None]
    return [statement]


def _names(nodes: list[ast.AST], ctx: type) -> set[str]:
    return {n.id for node in nodes for n in ast.walk(node)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


def _slice(statements: list[ast.stmt], last: ast.stmt) -> list[ast.stmt]:
    """The statements ``last`` depends on through the names they assign, in source order."""
    needed = _names(_header(last), ast.Load)
    kept = [last]
    for statement in reversed(statements[:statements.index(last)]):
        parts = _header(statement)
        if _names(parts, ast.Store) & needed:
            kept.append(statement)
            needed |= _names(parts, ast.Load)
    return sorted(kept, key=lambda s: (s.lineno, s.col_offset))


class _Resolver:
    """User functions called by name, resolved through a frame's locals, globals and ``self``."""

    def __init__(self, frame: FrameType) -> None:
        self.scope = {**frame.f_globals, **frame.f_locals}

    def __call__(self, call: ast.Call) -> Any:
        func = call.func
        if isinstance(func, ast.Name):
            target = self.scope.get(func.id)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            owner = self.scope.get(func.value.id)
            # a module's function (`helpers.decode`), else a method of the object's class
            holder = owner if isinstance(owner, type(ast)) else type(owner)
            target = getattr(holder, func.attr, None)
        else:
            return None
        code = getattr(getattr(target, "__func__", target), "__code__", None)
        return code if code is not None and is_user_file(code.co_filename) else None


def _calls(node: ast.AST) -> Iterator[ast.Call]:
    """The calls in ``node``, innermost (first evaluated) first."""
    for child in ast.iter_child_nodes(node):
        yield from _calls(child)
    if isinstance(node, ast.Call):
        yield node


def _first_cut(statement: ast.stmt, path: str, resolve: _Resolver, depth: int,
               inputs: set[str] = frozenset()) -> tuple[str, Location] | None:
    """The first cut in ``statement`` (calls in evaluation order, a called user function's body
    before the call's own attribute), ignoring cuts of the names in ``inputs``."""
    for part in _header(statement):
        for node in _calls(part):
            code = resolve(node) if depth else None
            if code is not None:
                callee = function_node(code)
                for inner in _simple_statements(callee) if callee is not None else []:
                    found = _first_cut(inner, code.co_filename, resolve, depth - 1)
                    if found is not None:
                        return found
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in CUTS and func.attr != "data" \
                    and not _of(func, inputs) and not (node.args and _is_name(node.args[0], inputs)):
                return f".{func.attr}()", (path, node.lineno, node.col_offset + 1)
        for node in ast.walk(part):
            if isinstance(node, ast.Attribute) and node.attr == "data" \
                    and isinstance(node.ctx, ast.Load) and not _of(node, inputs):
                return ".data", (path, node.lineno, node.col_offset + 1)
    return None


def _of(attribute: ast.Attribute, names: set[str]) -> bool:
    """Whether ``attribute`` is read from one of ``names`` (``y.long``: ``y``)."""
    return _is_name(attribute.value, names)


def _is_name(node: ast.AST, names: set[str]) -> bool:
    return isinstance(node, ast.Name) and node.id in names


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)
