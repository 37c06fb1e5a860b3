"""The batch-size setting a hand-built batch of one sample was read from.

A script may build its batches without a ``DataLoader`` (``x = torch.randn(args.batch_size, 3,
32, 32)``, ``x = data[i:i + cfg["batch_size"]]``), so no loader says where the batch size came
from. On PyTorch's batch-of-one error, :func:`batch_size_read` looks at the user frames on the
stack, innermost first, for a batch-size setting that the frame's function reads (an attribute
or a constant subscript whose name says a batch size: ``args.batch_size``, ``cfg["bs"]``) and
whose live value, read from the frame's variable without running user code (a ``dict``'s
entry, or the instance ``__dict__`` of a namespace or config object), is 1: the batch that
failed holds one sample because that setting says so. Only called on that error.
"""

from __future__ import annotations

import ast
import sys
from typing import Any

from trainguard.sanitize.core.frames import user_frames
from trainguard.sanitize.core.source import function_node

__all__ = ["batch_size_read"]

_FRAMES = 8  # user frames looked at, innermost first


def batch_size_read() -> tuple[str, str, str] | None:
    """``(path, key, text)`` of the first batch-size setting equal to 1 that a user frame's
    function reads (``text``: how it reads it, ``args.batch_size``), or None."""
    for frame in user_frames(sys._getframe(1), limit=_FRAMES):
        found = _read_in(frame)
        if found is not None:
            return (frame.f_code.co_filename, *found)
    return None


def _read_in(frame: Any) -> tuple[str, str] | None:
    node = function_node(frame.f_code)
    if node is None:
        return None
    body = node.body if isinstance(node, ast.Module) else [node]
    names = {**frame.f_globals, **frame.f_locals}  # (one snapshot of the frame's variables)
    for stmt in body:
        for expr in ast.walk(stmt):
            read = _setting(expr)
            if read is None:
                continue
            name, key = read
            if _value(names.get(name), key) == 1:
                return key, ast.unparse(expr)
    return None


def _setting(expr: ast.AST) -> tuple[str, str] | None:
    """``(variable, key)`` of ``name.key`` or ``name["key"]`` whose key names a batch size."""
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        name, key = expr.value.id, expr.attr
    elif isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Name) and \
            isinstance(expr.slice, ast.Constant) and isinstance(expr.slice.value, str):
        name, key = expr.value.id, expr.slice.value
    else:
        return None
    low = key.lower()
    return (name, key) if "batch_size" in low or low in ("bs", "batch") else None


def _value(holder: Any, key: str) -> Any:
    """``holder``'s entry ``key`` (a ``dict``'s, or its instance ``__dict__``'s), read without
    running user code; None when there is none. An ``int`` only (``True`` is not 1 here)."""
    try:
        if type(holder) is dict:
            value = holder.get(key)
        else:
            value = object.__getattribute__(holder, "__dict__").get(key)
    except Exception:  # (no instance dict: a slotted object, a module's proxy)
        return None
    return value if type(value) is int else None
