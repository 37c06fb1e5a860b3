"""Where a loss target that has more values per sample than the prediction took them: the line
of the user's code that read a per-dimension value into it.

Used by TG403 when an elementwise loss gets an ``(N, 1)`` prediction and an ``(N, K)`` target
(a TD target built from a log-probability of a K-dimensional action that was not summed). The
extra dimension was decided where the target was computed, not at the loss, but the target was
often computed under ``torch.no_grad()`` (no graph to read). The frame that called the loss is
alive and holds the intermediate values by name:

1. the loss call's target argument (the second positional one, or ``target=``; method calls
   without arguments on it, ``td_target.detach()``, looked through) is a name bound to a
   tensor of the target's shape;
2. its last assignment above the loss in that function (the module's own code for a script) is
   read; of the names whose values flow into it elementwise (not a call's arguments: ``critic(s,
   a)``), exactly one holds a tensor of the target's shape
   (``next_value`` in ``td_target = rewards + gamma * next_value``): the value came through it,
   and its assignment is read in turn (up to 8 steps);
3. the answer is the last assignment on that path whose wide operand was not itself computed
   from a wide operand (``entropy = -log_prob``, ``log_prob`` coming from the actor's call), or
   that reads none (``td = r + gamma * q`` broadcasting there): the line where the target took
   its extra values, where a ``.sum(-1, keepdim=True)`` or an ``unsqueeze`` belongs; only when
   an assignment on the path also reads a name of the prediction's shape (``rewards``, ``(N,
   1)``): the target was meant to have that shape. A target of another shape throughout (the
   batch's own labels) keeps the loss line.

Cost: at a finding only (once per loss line), one parse of the source file (cached).
"""

from __future__ import annotations

import ast
from types import FrameType
from typing import Any

from trainguard.sanitize.core.frames import Location
from trainguard.sanitize.core.source import SourceFile
from trainguard.sanitize.core.stored_target import target_arg, top_level_binding
from trainguard.sanitize.core.target_origin import last_binding

__all__ = ["widened_at"]

_STEPS = 8  # assignments followed back from the loss


def widened_at(where: Any, frame: FrameType | None, prediction: Any,
               target: Any) -> tuple[Location, str] | None:
    """``(location, name read there)`` of the assignment where ``target`` (of the loss call at
    ``where``, run by ``frame``) took its extra values (see the module doc), or None."""
    if where is None or frame is None or frame.f_code.co_filename != where[0]:
        return None
    try:
        return _widened(where, frame, tuple(target.shape), tuple(prediction.shape))
    except Exception:  # a locating aid: never in the way of the finding
        return None


def _widened(where: Any, frame: FrameType, shape: tuple,
             narrow: tuple) -> tuple[Location, str] | None:
    file = SourceFile.load(where[0])
    call = file.call_at(where[1], where[2] - 1) if file is not None else None
    if call is None:
        return None
    arg = target_arg(call)
    while isinstance(arg, ast.Call) and not arg.args and isinstance(arg.func, ast.Attribute):
        arg = arg.func.value  # ``td_target.detach()``, ``.float()``
    if not isinstance(arg, ast.Name) or _shape(frame, arg.id) != shape:
        return None
    scope, line, name = file.scope(call), call.lineno, arg.id
    found, mixed = None, False
    for _ in range(_STEPS):
        bound = top_level_binding(scope, name, line) if isinstance(scope, ast.Module) \
            else last_binding(scope, name, line)
        if bound is None:
            break
        read = {n: _shape(frame, n) for n in _operands(bound.value)}
        mixed = mixed or narrow in read.values()
        wide = {n for n, s in read.items() if s == shape}
        if len(wide) != 1:  # broadcast here (none), or several ways in: this line
            found = found or ((where[0], bound.lineno, bound.col_offset + 1), name)
            break
        found = ((where[0], bound.lineno, bound.col_offset + 1), next(iter(wide)))
        name, line = found[1], bound.lineno
    return found if mixed and found is not None and found[0][1] != where[1] else None


def _operands(expr: ast.AST) -> list[str]:
    """The names whose values flow into ``expr`` elementwise: not the arguments of a call
    (``critic(s, a)``), which a model or function maps to another shape, but the tensor a method
    is called on (``log_prob.clamp(...)``)."""
    if isinstance(expr, ast.Name):
        return [expr.id]
    if isinstance(expr, ast.Call):
        func = expr.func
        return _operands(func.value) if isinstance(func, ast.Attribute) else []
    if isinstance(expr, ast.Attribute):
        return []  # (``self.gamma``, ``x.shape``)
    return [n for child in ast.iter_child_nodes(expr) for n in _operands(child)]


def _shape(frame: FrameType, name: str) -> tuple | None:
    value = frame.f_locals.get(name, frame.f_globals.get(name))
    shape = getattr(value, "shape", None)
    return tuple(shape) if shape is not None and hasattr(value, "dim") else None
