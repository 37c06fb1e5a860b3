"""Where a module's output, bound to a name in the user's function, is used again after a line.

TG202 reads these when a backward fails because an earlier backward freed the graph of a module
output: the output's assignment (``fake = netG(noise)``, ``pred_real = netD(real)``) is found from
the line that made it, and the function is searched for the later use that put the freed graph
into the failing backward. Source only (``SourceFile``); nothing is called.
"""

from __future__ import annotations

import ast
from typing import Any

from trainguard.sanitize.core.frames import read_path
from trainguard.sanitize.core.source import SourceFile


def _named_output(made: Any) -> tuple[SourceFile, ast.AST, str] | None:
    """``(file, function, name)`` of the assignment ``name = module(...)`` whose call is at
    ``made`` (path, line, column); None when the call is not assigned to one plain name."""
    file = SourceFile.load(made[0]) if made is not None else None
    call = file.call_at(made[1], made[2] - 1) if file is not None else None
    if call is None:
        return None
    assign = file.parents.get(call)
    if not (isinstance(assign, ast.Assign) and len(assign.targets) == 1
            and isinstance(assign.targets[0], ast.Name)):
        return None
    return file, file.scope(call), assign.targets[0].id


def taken_whole(made: Any, until: Any, exc: BaseException) -> tuple[Any, str] | None:
    """``(location, "netD(fake)")``: the one module call, after the assignment ``fake =
    netG(noise)`` at ``made`` and before the backward at ``until`` in the same function, that is
    given the name whole (not ``fake.detach()``): where the first backward's graph took the
    output in. The callee must be an ``nn.Module`` in a frame of the failing traceback (not
    ``torch.mean(fake)``). None when there is not exactly one, or the lines are in different
    functions or files."""
    if made is None or until is None or made[0] != until[0]:
        return None
    named = _named_output(made)
    if named is None:
        return None
    file, scope, name = named
    later = [c for c in ast.walk(scope) if isinstance(c, ast.Call)
             and made[1] < c.lineno <= until[1] and file.scope(c) is scope
             and any(isinstance(a, ast.Name) and a.id == name for a in c.args)]
    if len(later) != 1 or not _module_called(later[0], made[0], exc):
        return None
    return (made[0], later[0].lineno, later[0].col_offset + 1), ast.unparse(later[0])


def read_after(made: Any, after: Any, until: Any) -> Any | None:
    """The location of the first read of the name bound at ``made`` (``pred_real = netD(real)``)
    on a line after the backward at ``after`` and up to the backward at ``until``, all three in
    one function: where an output whose graph the first backward freed enters the second loss
    (``g_loss = crit(pred_fake - pred_real.mean())``). None when the name is bound again first,
    there is no such read, or the lines are in different files or functions."""
    if made is None or after is None or until is None or not made[0] == after[0] == until[0]:
        return None
    named = _named_output(made)
    if named is None:
        return None
    file, scope, name = named
    uses = sorted((n.lineno, n.col_offset, isinstance(n.ctx, ast.Store))
                  for n in ast.walk(scope) if isinstance(n, ast.Name) and n.id == name
                  and after[1] < n.lineno <= until[1] and file.scope(n) is scope)
    first, last = getattr(scope, "lineno", 1), getattr(scope, "end_lineno", until[1])
    if not uses or uses[0][2] or not first <= after[1] < until[1] <= last:
        return None
    return made[0], uses[0][0], uses[0][1] + 1


def _module_called(call: ast.Call, path: str, exc: BaseException) -> bool:
    """Whether ``call``'s callee is an ``nn.Module`` in a frame of ``exc``'s traceback that runs
    ``path`` (names and attributes resolved without calling anything)."""
    from torch import nn

    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_filename == path and \
                isinstance(read_path(frame, call.func, global_names=True), nn.Module):
            return True
        tb = tb.tb_next
    return False
