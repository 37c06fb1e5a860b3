"""Submodule outputs that ``forward`` computes and throws away: ``out = self.fc(h)`` where
nothing reads ``out`` afterwards, or ``x = self.blocks[i](x)`` inside ``for i, x in
enumerate(xs)``, whose next iteration rebinds ``x`` while the rest of ``forward`` goes on with
``xs``. The submodule runs, but its output reaches neither what ``forward`` returns nor anything
else, so no gradient flows to its parameters: they never change ("parameters that were not used
in producing loss", https://github.com/pytorch/pytorch/issues/41324).

The name counts as unread when no load of it comes after the assignment, none sits in a nested
function, and every loop around the assignment either rebinds it as its own target or never
reads it. The submodule must be used nowhere else (not by another statement, another method or
the training code, nor through ``self.children()`` and the like), and the file registers no
forward hook (a hook may take the output: ``x = layer(x)`` run only to fire it). A name starting
with ``_`` is a declared throwaway.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from trainguard.lint.astutil import dotted, self_attr, walk_local
from trainguard.lint.cuts import parametric, submodules_with_parameters
from trainguard.lint.script import Script
from trainguard.lint.unused import GENERIC_REACH, plain_module

__all__ = ["DiscardedOutput", "discarded_outputs"]

_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_DYNAMIC = {"locals", "vars", "exec", "eval"}


@dataclass(frozen=True, slots=True)
class DiscardedOutput:
    """``stmt`` in ``cls.forward`` binds ``name`` to the output of ``module`` (its source text),
    and nothing reads ``name`` afterwards; ``loop`` is the ``for`` that rebinds it, if any."""

    cls: ast.ClassDef
    stmt: ast.Assign
    name: str
    module: str
    loop: ast.AST | None


def discarded_outputs(script: Script) -> list[DiscardedOutput]:
    if "forward" not in script.source or "register_forward" in script.source:
        return []
    built = {dotted(n.func) for n in script.calls}
    out = []
    for name, cls in script.classes.items():
        methods = {b.name: b for b in cls.body if isinstance(b, ast.FunctionDef)}
        forward, init = methods.get("forward"), methods.get("__init__")
        if forward is None or init is None or name not in built or \
                not plain_module(script, cls) or _generic_reach(cls, init):
            continue
        subs = submodules_with_parameters(script, cls)
        prefixes = _registered_prefixes(script, init)
        if not subs and not prefixes or any(
                isinstance(n, ast.Call) and dotted(n.func) in _DYNAMIC for n in ast.walk(forward)):
            continue
        for stmt in walk_local(forward):
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and
                    isinstance(stmt.targets[0], ast.Name)) or script.grad_disabled(stmt):
                continue
            target = stmt.targets[0].id
            if target.startswith("_"):
                continue
            callee = next((c.func for c in ast.walk(stmt.value) if isinstance(c, ast.Call) and
                           _submodule(c.func, subs, prefixes)), None)
            if callee is None or _read_after(forward, stmt, target) or \
                    _used_elsewhere(script, cls, callee, stmt):
                continue
            out.append(DiscardedOutput(cls, stmt, target, script.segment(callee) or "it",
                                       _rebinding_loop(forward, stmt, target)))
    return out


def _generic_reach(cls: ast.ClassDef, init: ast.FunctionDef) -> bool:
    """Outside ``__init__`` (where a loop over ``self.modules()`` initializes weights), the
    class reaches its submodules without naming them (``self.children()``, ``self._modules``,
    ``vars(self)``)."""
    skip = {id(n) for n in ast.walk(init)}
    return any(id(n) not in skip and (isinstance(n, ast.Attribute) and n.attr in GENERIC_REACH or
                                      isinstance(n, ast.Call) and dotted(n.func) == "vars")
               for n in ast.walk(cls))


def _registered_prefixes(script: Script, init: ast.FunctionDef) -> set[str]:
    """The names ``__init__`` registers layers with parameters under, by string:
    ``self.add_module(f"rcu{i}", Unit(ch))``, ``setattr(self, f"head{i}", nn.Linear(...))``;
    an f-string gives its constant start."""
    found = set()
    for call in walk_local(init):
        if not isinstance(call, ast.Call) or len(call.args) < 2:
            continue
        f = call.func
        if self_attr(f) == "add_module":
            key, value = call.args[0], call.args[1]
        elif dotted(f) == "setattr" and len(call.args) == 3 and dotted(call.args[0]) == "self":
            key, value = call.args[1], call.args[2]
        else:
            continue
        prefix = _prefix(key)
        if prefix and parametric(script, value, 4, imported=True):
            found.add(prefix)
    return found


def _prefix(key: ast.AST) -> str | None:
    if isinstance(key, ast.Constant) and isinstance(key.value, str):
        return key.value
    if isinstance(key, ast.JoinedStr) and key.values and \
            isinstance(key.values[0], ast.Constant) and isinstance(key.values[0].value, str):
        return key.values[0].value
    return None


def _submodule(func: ast.AST, subs: set[str], prefixes: set[str]) -> bool:
    """``self.fc``, ``self.blocks[i]`` (a layer with parameters of the class) or
    ``getattr(self, f"rcu{i}")`` (one registered under that name)."""
    if isinstance(func, ast.Subscript):
        func = func.value
    if self_attr(func) in subs:
        return True
    return isinstance(func, ast.Call) and dotted(func.func) == "getattr" and \
        len(func.args) >= 2 and dotted(func.args[0]) == "self" and \
        _prefix(func.args[1]) in prefixes


def _read_after(func: ast.FunctionDef, stmt: ast.Assign, name: str) -> bool:
    """Whether a load of ``name`` may see what ``stmt`` binds: one after it, one in a nested
    function, or one in a loop around it that does not rebind ``name`` as its own target."""
    end = (stmt.end_lineno or stmt.lineno, stmt.end_col_offset or 0)
    for n in ast.walk(func):
        if isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names:
            return True
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and n is not func \
                and any(isinstance(m, ast.Name) and m.id == name for m in ast.walk(n)):
            return True
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) and \
                (n.lineno, n.col_offset) > end:
            return True
    for loop in _loops_around(func, stmt):
        if isinstance(loop, (ast.For, ast.AsyncFor)) and _binds(loop.target, name):
            continue  # each iteration starts by rebinding it
        if any(isinstance(m, ast.Name) and m.id == name and isinstance(m.ctx, ast.Load)
               for m in ast.walk(loop)):
            return True
    return False


def _binds(target: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(target))


def _loops_around(func: ast.FunctionDef, stmt: ast.AST) -> list[ast.AST]:
    return [n for n in walk_local(func) if isinstance(n, _LOOPS) and n is not stmt and
            any(m is stmt for m in ast.walk(n))]


def _rebinding_loop(func: ast.FunctionDef, stmt: ast.AST, name: str) -> ast.AST | None:
    return next((lp for lp in reversed(_loops_around(func, stmt))
                 if isinstance(lp, (ast.For, ast.AsyncFor)) and _binds(lp.target, name)), None)


def _used_elsewhere(script: Script, cls: ast.ClassDef, callee: ast.AST, stmt: ast.AST) -> bool:
    """The submodule is named anywhere but in ``stmt`` and where ``__init__`` builds it: its
    output may reach the loss another way."""
    base = callee.value if isinstance(callee, ast.Subscript) else callee
    own = {id(n) for n in ast.walk(stmt)}
    init = next(b for b in cls.body if isinstance(b, ast.FunctionDef) and b.name == "__init__")
    own |= {id(n) for n in ast.walk(init)}
    if isinstance(base, ast.Call):  # getattr(self, f"rcu{i}"): another lookup by that name
        prefix = _prefix(base.args[1]) or ""
        keys = [_prefix(n.args[1]) for n in script.nodes if isinstance(n, ast.Call) and
                dotted(n.func) in ("getattr", "setattr") and len(n.args) >= 2 and
                id(n) not in own]
        return any(k is None or k.startswith(prefix) or prefix.startswith(k) for k in keys)
    attr = base.attr  # type: ignore[attr-defined]
    return any(isinstance(n, ast.Attribute) and n.attr == attr and id(n) not in own
               for n in script.nodes) or \
        any(isinstance(n, ast.Constant) and n.value == attr for n in script.nodes)
