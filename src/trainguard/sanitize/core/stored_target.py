"""Where a loss's target was made when the loss takes it out of labels stored before the loop.

Used by TG402 once ``target_origin.py`` found no dataset behind a target of the wrong form. A run
that keeps all its labels in one tensor and gives the loss a part of it each step
(``loss_fn(model(x_train[idx]), y_train[idx])``, ``criterion(out[keep], target[keep])``) decided
the labels' values where that tensor was assigned, not at the loss. Autograd keeps no record of
a target (it never requires grad), but the frame that called the loss is alive:

1. the call running on the frame's line is read from the source; its target argument (the second
   positional one, or ``target=``) must be a name bound to the target itself, or a name or an
   ``obj.attr`` indexed (``y_train[idx]``, ``self.labels[batch]``) whose value in the frame is a
   tensor holding the target's values (same dtype, at least as many values, a range covering the
   target's); exactly one such argument on the line;
2. the answer is the last assignment of that name above the loss in the frame's function, or, for
   a global that function reads, in the module's top-level code; an attribute answers with the
   ``self.<attr> = ...`` of its class's ``__init__``. An assignment inside a loop that also runs
   the loss makes the target each step from the batch: no answer (the loss line stays);
3. an assignment from a call of a function of the user's module (``x, y = read_split(path)``)
   goes on to the ``return`` that call reaches (``target_origin.returned_by``).

Cost: at a finding only, one parse of the source file (cached) and the target's and the stored
tensor's minimum and maximum (a sync on CUDA).
"""

from __future__ import annotations

import ast
from types import FrameType
from typing import Any

from trainguard.sanitize.core.bounds import parse_file
from trainguard.sanitize.core.cuts import assigned_in_init
from trainguard.sanitize.core.frames import Location, is_user_file, read_path
from trainguard.sanitize.core.source import SourceFile, function_node
from trainguard.sanitize.core.target_origin import (last_binding, loader_element,
                                                    returned_by, unpacked_at,
                                                    unwrapped)
from trainguard.sanitize.core.values import readable

__all__ = ["stored_origin", "top_level_binding", "target_arg"]

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_FRAMES = 4  # user frames searched outwards from the loss call for a TensorDataset's labels


def stored_origin(frame: FrameType | None, target: Any, passes: Any = ()) -> Location | None:
    """The line that assigned the stored labels the loss call running in ``frame`` (the
    innermost user frame at the loss) took ``target`` from (see the module doc), or None.
    ``passes``: as for ``target_origin``."""
    if frame is None or target is None or not is_user_file(frame.f_code.co_filename):
        return None
    try:
        return _stored(frame, target) or _in_tensor_dataset(frame, target, passes)
    except Exception:  # a locating aid: never in the way of the finding
        return None


def _in_tensor_dataset(frame: FrameType, target: Any, passes: Any) -> Location | None:
    """For a target taken out of the batches of a DataLoader over a ``TensorDataset``: the line
    that bound the labels tensor the dataset holds (``y = torch.from_numpy(ids).long()`` before
    ``TensorDataset(x, y)``), found by identity among the locals of the user frames from the
    loss's outwards (a training helper's caller: a script's globals)."""
    from torch.utils.data import TensorDataset

    stored, seen = None, 0
    while frame is not None and seen < _FRAMES:
        if is_user_file(frame.f_code.co_filename):
            seen += 1
            found = loader_element(frame, target, passes) if stored is None else None
            if found is not None:
                dataset, path = unwrapped(found[0].dataset), found[1]
                if not isinstance(dataset, TensorDataset) or len(path) != 1 or \
                        not isinstance(path[0], int) or path[0] >= len(dataset.tensors):
                    return None
                stored = dataset.tensors[path[0]]
            name = next((n for n, v in frame.f_locals.items() if v is stored), None) \
                if stored is not None else None
            if name is not None:
                return _bound_at(frame, name)
        frame = frame.f_back
    return None


def _bound_at(frame: FrameType, name: str) -> Location | None:
    """Where ``name``, a local of ``frame`` (a global of a script's top-level code), was last
    bound above the line ``frame`` runs."""
    function = function_node(frame.f_code)
    if function is None:
        return None
    line = frame.f_lineno
    assigned = top_level_binding(function, name, line) if frame.f_code.co_name == "<module>" \
        else last_binding(function, name, line)
    return _made_by(assigned, name, frame) if assigned is not None else None


def _stored(frame: FrameType, target: Any) -> Location | None:
    function, file = function_node(frame.f_code), SourceFile.load(frame.f_code.co_filename)
    if function is None or file is None:
        return None
    line = frame.f_lineno
    found = [(call, arg) for call, arg in _target_args(function, line)
             if _holds(arg, frame, target)]
    if len(found) != 1:
        return None  # none, or several loss calls on the line that could have been this one
    call, arg = found[0]
    stored = arg.value if isinstance(arg, ast.Subscript) else arg
    if isinstance(stored, ast.Attribute):
        owner = read_path(frame, stored.value, global_names=True)
        if owner is None or not is_user_file(_class_file(type(owner))):
            return None
        return assigned_in_init(type(owner), stored.attr)
    name = stored.id
    code = frame.f_code
    if code.co_name == "<module>" or name in code.co_varnames:
        assigned = last_binding(function, name, line)
        if assigned is not None and _in_loop_around(file, assigned, call, function):
            return None  # made each step (from the batch): not stored before the loop
    else:  # a global the function reads: the module's top-level assignment
        tree = parse_file(code.co_filename)
        assigned = top_level_binding(tree, name, _module_line(frame)) if tree else None
    if assigned is None:
        return None
    return _made_by(assigned, name, frame)


def _target_args(function: ast.AST, line: int) -> list[tuple[ast.Call, ast.AST]]:
    """``(call, target argument)`` for each call spanning ``line`` that has one."""
    found = []
    for call in ast.walk(function):
        if not isinstance(call, ast.Call) or not \
                call.lineno <= line <= (call.end_lineno or call.lineno):
            continue
        arg = target_arg(call)
        if isinstance(arg, (ast.Name, ast.Subscript)):
            found.append((call, arg))
    return found


def target_arg(call: ast.Call) -> ast.AST | None:
    """The target argument of a loss call: ``target=``, else the second positional argument
    (None when a ``*args`` comes first: its position is not known)."""
    arg = next((k.value for k in call.keywords if k.arg == "target"), None)
    if arg is None and len(call.args) >= 2 and \
            not any(isinstance(a, ast.Starred) for a in call.args[:2]):
        arg = call.args[1]
    return arg


def _holds(arg: ast.AST, frame: FrameType, target: Any) -> bool:
    """Whether ``arg`` is a name bound to ``target``, or an indexed name or ``obj.attr`` whose
    tensor holds ``target``'s values."""
    if isinstance(arg, ast.Name):
        return read_path(frame, arg, global_names=True) is target
    stored = arg.value if isinstance(arg, ast.Subscript) else None
    if not (isinstance(stored, ast.Name) or isinstance(stored, ast.Attribute)
            and isinstance(stored.value, ast.Name)):
        return False
    base = read_path(frame, stored, global_names=True)
    import torch

    if not isinstance(base, torch.Tensor) or base is target or base.dtype != target.dtype or \
            base.numel() < target.numel() or target.numel() == 0 or \
            not readable(base) or not readable(target):
        return False
    with torch.no_grad():
        return bool(base.min() <= target.min()) and bool(target.max() <= base.max())


def _in_loop_around(file: SourceFile, assigned: ast.AST, call: ast.AST, scope: ast.AST) -> bool:
    """Whether a ``for``/``while`` of ``scope`` holds both ``assigned`` and ``call``."""
    loops, node = set(), file.loop(call, scope)
    while node is not None:
        loops.add(node)
        node = file.loop(node, scope)
    node = file.parents.get(assigned)
    while node is not None and node is not scope:
        if node in loops:
            return True
        node = file.parents.get(node)
    return False


def top_level_binding(tree: ast.Module, name: str, before: int) -> ast.stmt | None:
    """The last assignment of ``name`` in the module's own code (not in a function or class)
    above line ``before``."""
    made = [last_binding(stmt, name, before) for stmt in tree.body if not isinstance(stmt, _DEFS)]
    made = [m for m in made if m is not None]
    return max(made, key=lambda n: n.lineno) if made else None


def _made_by(assigned: ast.stmt, name: str, frame: FrameType) -> Location:
    """The assignment's line, or the ``return`` of the user's function it calls."""
    path = frame.f_code.co_filename
    value = getattr(assigned, "value", None)
    position = unpacked_at(assigned, name)
    if position is not None and isinstance(value, (ast.Tuple, ast.List)) and \
            position < len(value.elts):
        value = value.elts[position]
    made = returned_by(None, value, frame.f_globals) if value is not None else None
    if made is not None:
        return made
    at = value if value is not None and position is not None else assigned
    return (path, at.lineno, at.col_offset + 1)


def _module_line(frame: FrameType) -> int:
    """The line the module-level code of ``frame``'s file is running (it called the function
    that reads the global), or a line past every other when that code is not on the stack."""
    outer = frame.f_back
    while outer is not None:
        if outer.f_code.co_name == "<module>" and \
                outer.f_code.co_filename == frame.f_code.co_filename:
            return outer.f_lineno
        outer = outer.f_back
    return 1 << 30


def _class_file(cls: type) -> str:
    code = getattr(getattr(cls, "__init__", None), "__code__", None)
    return code.co_filename if code is not None else ""
