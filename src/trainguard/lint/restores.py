"""What a resume reads back from a loaded checkpoint.

``ckpt = torch.load(path)`` followed by ``model.load_state_dict(ckpt["model"])`` and
``trainer.step = ckpt["step"]``: the entries read (by constant key), the statements that read
them, and which of them restore a module's or optimizer's state (``load_state_dict``) or assign
the run's position. A checkpoint used any other way (handed whole to a helper, iterated,
returned, ``**``-expanded, read with a computed key) cannot be read and gives None.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from trainguard.lint.astutil import parent, statement_of, walk_local
from trainguard.lint.dataflow import scope_of
from trainguard.lint.script import Script

__all__ = ["Restore", "restores"]


@dataclass
class Restore:
    """A ``torch.load`` bound to ``name`` and read by constant keys only."""

    load: ast.Call
    name: str
    keys: set[str] = field(default_factory=set)
    loaded: set[str] = field(default_factory=set)  # keys handed to a load_state_dict(...)
    assigned: set[str] = field(default_factory=set)  # keys whose value is stored or returned
    last: ast.AST | None = None  # the last statement that reads the checkpoint


def restores(script: Script) -> list[Restore]:
    out = []
    for call in script.calls:
        if script.call_qualname(call) != "torch.load":
            continue
        stmt = parent(call)
        if not (isinstance(stmt, ast.Assign) and stmt.value is call and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)):
            continue
        found = _reads(Restore(call, stmt.targets[0].id), scope_of(call), stmt)
        if found is not None and found.keys:
            out.append(found)
    return out


def _reads(found: Restore, scope: ast.AST, bound: ast.Assign) -> Restore | None:
    for node in walk_local(scope, into_defs=True):
        if not (isinstance(node, ast.Name) and node.id == found.name):
            continue
        if isinstance(node.ctx, ast.Store):
            if node is not bound.targets[0]:
                return None  # rebound: which value a read sees is not this one alone
            continue
        key = _constant_key(node)
        if key is None:
            return None
        found.keys.add(key)
        stmt = statement_of(node)
        entry = parent(node) if isinstance(parent(node), ast.Subscript) else \
            parent(parent(node))  # ckpt["k"], or the ckpt.get("k") call
        up = parent(entry) if entry is not None else None  # the call it is handed to
        if isinstance(up, ast.Call) and isinstance(up.func, ast.Attribute) and \
                up.func.attr == "load_state_dict":
            found.loaded.add(key)
        elif isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return)):
            found.assigned.add(key)
        if stmt is not None and (found.last is None or stmt.lineno > found.last.lineno):
            found.last = stmt
    return found


def _constant_key(name: ast.Name) -> str | None:
    """``ckpt["step"]`` or ``ckpt.get("step", 0)``: the constant key read; else None."""
    up = parent(name)
    if isinstance(up, ast.Subscript) and up.value is name and \
            isinstance(up.slice, ast.Constant) and isinstance(up.slice.value, str):
        return up.slice.value
    call = parent(up) if up is not None else None
    if isinstance(up, ast.Attribute) and up.attr == "get" and isinstance(call, ast.Call) and \
            call.func is up and call.args and isinstance(call.args[0], ast.Constant) and \
            isinstance(call.args[0].value, str):
        return call.args[0].value
    return None
