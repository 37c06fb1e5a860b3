"""Where a dict handed to a call was written, when a function of the user's returned it.

``torch.save(state.state_dict(), path)`` saves what a method of the user's built: the keys that
a finding about the dict's content asks to change are written in that method's ``return {...}``,
not at the call. :func:`returned_dict_line` finds it from the running frame without calling
anything: the call's function is read from the frame's variables (a function, or a method found
in the class dictionaries of the object it is called on), and in its source the ``return`` of a
dict display (or of a name last assigned one) whose constant keys are exactly the keys of the
dict that the call gave (so a function returning several dicts answers for the one seen).

Cost: at a finding only, one parse of the function's file (cached).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from types import FrameType, FunctionType
from typing import Any

from trainguard.sanitize.core.source import function_node, last_assigned
from trainguard.sanitize.core.step_site import frame_value

__all__ = ["own_returns", "returned_dict_line"]

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def returned_dict_line(call: ast.Call, frame: FrameType, obj: Any) -> tuple[str, int, int] | None:
    """``(path, line, 1)`` of the last entry of the dict display that the function called by
    ``call`` (an expression of ``frame``'s function) returns with exactly ``obj``'s keys; None
    when the function or such a display is not found."""
    if not isinstance(obj, Mapping) or not obj or not all(isinstance(k, str) for k in obj):
        return None
    func = _function(call.func, frame)
    node = function_node(func.__code__) if func is not None else None
    if node is None:
        return None
    keys = set(obj)
    for value in [r.value for r in own_returns(node) if r.value is not None]:
        if isinstance(value, ast.Name):
            value = last_assigned(node, value.id, None, (ast.Dict,))
        if isinstance(value, ast.Dict) and value.keys and _keys(value) == keys:
            last = value.keys[-1]
            return func.__code__.co_filename, (last or value.values[-1]).lineno, 1
    return None


def _function(node: ast.AST, frame: FrameType) -> FunctionType | None:
    """The plain function a call's ``func`` names: a variable, or a method of the class of the
    object it is read on (``self.state.state_dict``); properties and the like are not run."""
    if isinstance(node, ast.Name):
        found = frame_value(node, frame)
        return found if isinstance(found, FunctionType) else None
    if not isinstance(node, ast.Attribute):
        return None
    owner = frame_value(node.value, frame)
    for cls in type(owner).__mro__:
        if node.attr in vars(cls):
            found = vars(cls)[node.attr]
            return found if isinstance(found, FunctionType) else None
    return None


def own_returns(node: ast.AST) -> list[ast.Return]:
    """The ``return`` statements of the function ``node`` itself (not of functions or classes
    defined in it)."""
    found, todo = [], list(ast.iter_child_nodes(node))
    while todo:
        cur = todo.pop()
        if isinstance(cur, ast.Return):
            found.append(cur)
        elif not isinstance(cur, _SCOPES):
            todo.extend(ast.iter_child_nodes(cur))
    return found


def _keys(node: ast.Dict) -> set[str] | None:
    """The keys of a dict display when all are constant strings, else None."""
    keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return keys if len(keys) == len(node.keys) else None
