"""Where a loss's target got its shape: the assignment in the loss's own frame that bound it.

Used by TG402 (class indices as an ``(N, 1)`` column for ``cross_entropy``) and TG403 (a binary
cross-entropy target converted from the batch's labels without the prediction's ``(N, 1)``
shape) when PyTorch raises at the loss. The shape was decided where the target was assigned
(``y = torch.tensor(table[:, -1:])``, ``y = labels.float()``), not at the loss, and the frame
that called the loss is still on the failing traceback:

1. the loss call running on that frame's line is read from the source; its target argument (the
   second positional one, or ``target=``) is a name, a name indexed (``y[mask]``), or a name with
   methods called on it (``y.float()``);
2. that name, in the frame, holds a tensor whose values the target holds with the same trailing
   shape (the target itself for a bare name);
3. the answer is the last assignment of the name above the loss in the frame's function (the
   module's top-level code for a script): ``(path, line, col)`` and the assignment node. A name
   bound only by a ``for`` loop or a parameter has no such assignment: no answer.

Cost: at a finding only, one parse of the source file (cached).
"""

from __future__ import annotations

import ast
from types import FrameType
from typing import Any

from trainguard.sanitize.core.frames import Location, is_user_file, read_path, user_frame
from trainguard.sanitize.core.source import function_node
from trainguard.sanitize.core.stored_target import target_arg, top_level_binding
from trainguard.sanitize.core.target_origin import last_binding

__all__ = ["error_frame", "loss_args", "shaped_at"]


def error_frame(exc: BaseException) -> Any:
    """The failing traceback's innermost user frame; for an error seen while it leaves the loss
    call (the traceback starts inside the call, and the script may catch it), the user frame
    that made the call, on the stack above; or None."""
    tb, frame = exc.__traceback__, None
    top = tb.tb_frame if tb is not None else None
    while tb is not None:
        if is_user_file(tb.tb_frame.f_code.co_filename):
            frame = tb.tb_frame
        tb = tb.tb_next
    return frame if frame is not None or top is None else user_frame(top.f_back)


def loss_args(exc: BaseException, names: tuple[str, ...]) -> tuple[str, Any, Any] | None:
    """``(function, input, target)`` of the ``torch.nn.functional`` loss among ``names`` that
    the exception passed through (its innermost), or None."""
    tb = exc.__traceback__
    found = None
    while tb is not None:
        frame = tb.tb_frame
        name = frame.f_code.co_name
        if name in names and frame.f_code.co_filename.endswith("functional.py"):
            loc = frame.f_locals
            if "input" in loc and "target" in loc:
                found = (name, loc["input"], loc["target"])
        tb = tb.tb_next
    return found


def shaped_at(frame: FrameType | None, target: Any) -> tuple[Location, ast.stmt] | None:
    """``(location, assignment)`` of the line in ``frame``'s function that bound the name the
    loss call running there takes ``target`` from (see the module doc), or None."""
    if frame is None or target is None or not is_user_file(frame.f_code.co_filename):
        return None
    try:
        return _shaped(frame, target)
    except Exception:  # a locating aid: never in the way of the finding
        return None


def _shaped(frame: FrameType, target: Any) -> tuple[Location, ast.stmt] | None:
    function, line = function_node(frame.f_code), frame.f_lineno
    if function is None:
        return None
    names = {name for call in ast.walk(function) if isinstance(call, ast.Call)
             and call.lineno <= line <= (call.end_lineno or call.lineno)
             for name in [_named(target_arg(call))] if name is not None
             and _holds(read_path(frame, ast.Name(id=name), global_names=True), target)}
    if len(names) != 1:
        return None  # none, or several loss calls on the line that could have been this one
    name = names.pop()
    bound = top_level_binding(function, name, line) if frame.f_code.co_name == "<module>" \
        else last_binding(function, name, line)
    if bound is None:
        return None
    return (frame.f_code.co_filename, bound.lineno, bound.col_offset + 1), bound


def _named(arg: ast.AST | None) -> str | None:
    """The name a target argument reads: ``y``, ``y[mask]``, ``y.float()``; else None."""
    while isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute):
        arg = arg.func.value
    if isinstance(arg, ast.Subscript):
        arg = arg.value
    return arg.id if isinstance(arg, ast.Name) else None


def _holds(value: Any, target: Any) -> bool:
    """Whether ``value`` is ``target``, or a tensor of its trailing shape that it was indexed or
    converted from (as many rows or more)."""
    if value is target:
        return True
    shape, wanted = getattr(value, "shape", None), getattr(target, "shape", None)
    return shape is not None and wanted is not None and hasattr(value, "dim") and \
        len(shape) == len(wanted) >= 1 and tuple(shape[1:]) == tuple(wanted[1:]) and \
        shape[0] >= wanted[0]
