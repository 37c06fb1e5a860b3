"""Where a file path's value comes from, so that a load can be matched with a save.

The same path means the same binding, not the same text: a parameter is followed to what the
file's calls pass, a local name to its assignment, a path returned by a function of the file
that saves to it to that path, a registry the program fills (``self.index[name] = path``) to the
paths stored there. TG701 reads it to tell a file the program wrote from one from elsewhere;
TG504 to tell a resume of the program's own checkpoint.
"""

from __future__ import annotations

import ast

from trainguard.lint.astutil import dotted, parent, walk_local
from trainguard.lint.callgraph import bind_arguments
from trainguard.lint.dataflow import last_assignment
from trainguard.lint.script import Script

__all__ = ["origins"]


def origins(script: Script, expr: ast.AST, depth: int) -> set[tuple[object, ...]]:
    """Where a path's value comes from, as comparable keys: a parameter is followed to the
    arguments its function's calls in the file pass (a parameter nobody here passes stays
    itself: ``("param", function, name)``), a local name to its assignment (the same binding
    written and read is the same file), a literal to its text; anything else is its text."""
    if depth <= 0:
        return {("text", ast.unparse(expr))}
    returned = _returned(script, expr)
    if returned:  # store.offload(x): the paths that function of the file returns
        out: set[tuple[object, ...]] = set()
        for r in returned:
            out |= origins(script, r, depth - 1)
        return out
    if isinstance(expr, ast.Name):
        func = script.enclosing_function(expr)
        value = last_assignment(expr.id, expr)
        if value is not None:
            if isinstance(value, (ast.Name, ast.Constant)):
                return origins(script, value, depth - 1)
            if isinstance(value, ast.Call) and _returned(script, value):
                return origins(script, value, depth - 1)
            return {("text", ast.unparse(value))}
        listed = _iterated_from(script, expr)
        if listed:  # for name in files: the values the program put in that list
            out = set()
            for v in listed:
                out |= origins(script, v, depth - 1)
            return out
        params = [] if func is None else [a.arg for a in [
            *func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]]
        if func is not None and expr.id in params:
            names = params
            cls = script.enclosing_class(func)
            if cls is not None and names and not any(
                    dotted(d) == "staticmethod" for d in func.decorator_list):
                names = names[1:]
            out = set()
            for site in script.call_sites(func)[:8]:
                bound = bind_arguments(names, site)
                if expr.id not in bound:
                    return {("param", id(func), expr.id)}
                out |= origins(script, bound[expr.id], depth - 1)
            return out or {("param", id(func), expr.id)}
    if isinstance(expr, ast.Constant):
        return {("const", repr(expr.value))}
    if isinstance(expr, ast.Subscript) and (holder := dotted(expr.value)):
        # self.index[name]: the paths the program stored in that registry
        # (``self.index[name] = path`` beside the ``torch.save(obj, path)``)
        stored = [n.value for n in script.nodes if isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Subscript) and dotted(t.value) == holder for t in n.targets)]
        if stored:
            out = set()
            for value in stored[:8]:
                out |= origins(script, value, depth - 1)
            return out
    return {("text", ast.unparse(expr))}


def _iterated_from(script: Script, name: ast.Name) -> list[ast.expr]:
    """For a loop variable ``name`` of ``for name in files`` (``files`` a plain name): the values
    the file appends to ``files`` (``files.append(cache.put(...))``) or lists in its literal;
    empty otherwise."""
    loop = parent(name)
    while loop is not None and not isinstance(loop, (ast.For, ast.comprehension)):
        if isinstance(loop, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            return []
        loop = parent(loop)
    for n in script.nodes:
        if isinstance(n, (ast.For, ast.comprehension)) and isinstance(n.target, ast.Name) and \
                n.target.id == name.id and isinstance(n.iter, ast.Name) and \
                n.lineno <= name.lineno:  # type: ignore[attr-defined]
            held = n.iter.id
            values = [c.args[0] for c in script.calls if isinstance(c.func, ast.Attribute)
                      and c.func.attr == "append" and dotted(c.func.value) == held and c.args]
            values += [e for a in script.nodes if isinstance(a, ast.Assign)
                       and isinstance(a.value, ast.List) and any(
                           isinstance(t, ast.Name) and t.id == held for t in a.targets)
                       for e in a.value.elts]
            return values[:8]
    return []


def _returned(script: Script, value: ast.AST) -> list[ast.expr]:
    """The values a function of this file that writes with ``torch.save`` returns, when
    ``value`` calls one (one target, every ``return`` giving a value): ``path`` of
    ``torch.save(record, path); return path``. A function that saves nothing (a download
    helper) is judged by its call's text."""
    if not isinstance(value, ast.Call):
        return []
    targets = [t for t in script.targets(value) if not t.instance]
    if len(targets) != 1 or targets[0].script is not script:
        return []
    body = list(walk_local(targets[0].func))
    if not any(isinstance(c, ast.Call) and script.call_qualname(c) == "torch.save" for c in body):
        return []
    returns = [r for r in body if isinstance(r, ast.Return)]
    if not returns or any(r.value is None for r in returns):
        return []
    return [r.value for r in returns[:4] if r.value is not None]
