"""The evaluation ``no_grad`` block that a call needing grad was swept into.

An evaluation loop wrapped whole in ``with torch.no_grad():`` runs its model there (the clean
forward) and, beside it, a call that takes gradients (an adversarial attack's ``perturb``, whose
``backward`` then fails): the block is meant for the model's forwards, and the line to change is
the call, to be moved out of it (BorealisAI/advertorch#79). A block that holds only the call (a
runner calling a test step under ``no_grad``) is not one: the step asks for grad itself.
"""

from __future__ import annotations

import ast
from types import FrameType
from typing import Optional

from trainguard.sanitize.core.callstack import disables_grad
from trainguard.sanitize.core.frames import Location, read_path
from trainguard.sanitize.core.source import SourceFile

__all__ = ["evaluation_block"]


def evaluation_block(frame: FrameType, where: Location) -> Optional[Location]:
    """The ``with`` line of the ``no_grad`` (or ``inference_mode``) block of ``frame``'s function
    that holds the call at ``where`` (the line ``frame`` runs), when that block also calls a
    module of its own: a name or attribute (``net``, ``self.model``) that ``frame`` holds as an
    ``nn.Module``, called elsewhere than ``where``. None otherwise."""
    from torch import nn

    file = SourceFile.load(where[0])
    node = file.call_at(where[1], where[2] - 1) if file is not None else None
    cur = file.parents.get(node) if node is not None else None
    while cur is not None and not isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef)):
        if isinstance(cur, (ast.With, ast.AsyncWith)) and \
                any(disables_grad(item.context_expr) for item in cur.items):
            calls = (n for stmt in cur.body for n in ast.walk(stmt) if isinstance(n, ast.Call))
            if any(call.lineno != where[1] and
                   isinstance(read_path(frame, call.func, global_names=True), nn.Module)
                   for call in calls):
                return (where[0], cur.lineno, cur.col_offset + 1)
            return None
        cur = file.parents.get(cur)
    return None
