"""Whether a call is a hook dispatched to each callback of a collection.

A line that serves every callback (``for cb in self.callbacks: cb.on_epoch_end(state)``, an
event engine's ``for func, args in self.handlers[event]: func(self, *args)``) is no cause of its
own: the loop fires each event at its time, and a fault of one callback's code (a scheduler
stepped at the epoch's start, a checkpoint written on every rank) belongs in that callback.
"""

from __future__ import annotations

import ast

from trainguard.sanitize.core.frames import Location
from trainguard.sanitize.core.source import SourceFile

__all__ = ["dispatched"]


def dispatched(where: Location) -> bool:
    """Whether the call at ``where`` is a hook dispatched to each item of a collection
    (``for cb in self.callbacks: cb.on_epoch_end(...)``): a line that serves every callback, so
    a fault of one callback's own code belongs in that callback, not at the dispatch."""
    file = SourceFile.load(where[0])
    call = file.call_at(where[1], where[2] - 1) if file is not None else None
    recv = call.func.value if call is not None and isinstance(call.func, ast.Attribute) else \
        call.func if call is not None else None  # (``for cb in callbacks: cb(self, it)``)
    if isinstance(recv, ast.Name) and recv.id == "getattr" and call.args:  # type: ignore
        recv = call.args[0]  # (``getattr(cb, hook)(state)``: the hook named at run time)
    if not isinstance(recv, ast.Name):
        return False
    cur = file.parents.get(call)  # type: ignore[union-attr]
    while cur is not None and not isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                    ast.Lambda, ast.Module)):
        if isinstance(cur, (ast.For, ast.AsyncFor, ast.comprehension)) and \
                recv.id in _bound(cur.target):
            return True
        cur = file.parents.get(cur)  # type: ignore[union-attr]
    return False


def _bound(target: ast.AST) -> set[str]:
    """The names a loop's target binds (``for func, args in handlers``: both; not the ``self``
    of ``for self.epoch in ...``)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return {name for elt in target.elts for name in _bound(elt)}
    if isinstance(target, ast.Starred):
        return _bound(target.value)
    return {target.id} if isinstance(target, ast.Name) else set()
