"""The freezing store that left an optimizer with only frozen parameters, read from the source.

An optimizer built over parameters that all have ``requires_grad=False`` got them from the
``requires_grad`` stores that ran before it. When the function that built it first freezes a
whole model (``for p in model.parameters(): p.requires_grad = False``) and then, for the
parameters a condition picks, stores ``False`` again (``for n, p in model.named_parameters(): if
n.startswith("head"): p.requires_grad = False``), that second store changes nothing: those
parameters were frozen already, so the selective loop was meant to unfreeze (``True``). That
store is the line to change. Only this shape is named: a single freezing store before the
optimizer may be the intent (the optimizer's parameter list, or a missing unfreeze, is then the
fault), so it is left to the backward's line.

The loops' models are read from the builder's frame with ``vars()`` (``self.model``,
``model.encoder`` through ``_modules``), no user code runs; one parse of the builder's file.
"""

from __future__ import annotations

import ast
from types import FrameType
from typing import Any

from trainguard.sanitize.core.frames import Location, read_path
from trainguard.sanitize.core.source import function_node

__all__ = ["redundant_freeze"]


def redundant_freeze(frame: FrameType, built: Location, params: list[Any]) -> Location | None:
    """The selective ``requires_grad = False`` store (or ``requires_grad_(False)``) that the
    function of ``frame`` ran, before line ``built`` where it built an optimizer over ``params``
    (all frozen), after a store freezing every parameter of the same model; None when the
    source does not show that shape."""
    func = function_node(frame.f_code)
    if func is None or built[0] != frame.f_code.co_filename:
        return None
    wanted = {id(p) for p in params}
    blanket, selective, unfrozen = [], [], []
    for loop in (n for n in ast.walk(func) if isinstance(n, ast.For) and n.lineno < built[1]):
        model = _loop_model(frame, loop)
        if model is None or not any(id(p) in wanted for p in model.parameters()):
            continue
        unfrozen += [(store, model) for store in _stores(loop, True)]
        for store in _stores(loop, False):
            guarded = any(isinstance(n, ast.If) and store in list(ast.walk(n))
                          for n in ast.walk(loop))
            (selective if guarded else blanket).append((store, model))
    if not blanket or not selective:
        return None
    last = max(selective, key=lambda s: s[0].lineno)
    first = [s.lineno for s, m in blanket if m is last[1] and s.lineno < last[0].lineno]
    if not first or any(m is last[1] and min(first) < s.lineno < last[0].lineno
                        for s, m in unfrozen):
        return None  # (the whole model frozen first, then the picked ones stored False again)
    return frame.f_code.co_filename, last[0].lineno, last[0].col_offset + 1


def _stores(loop: ast.For, value: bool) -> list[ast.AST]:
    """The stores of ``value`` into the loop variable's ``requires_grad`` in ``loop``'s body:
    ``p.requires_grad = False``, ``p.requires_grad_(False)``."""
    names = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    found: list[ast.AST] = []
    for node in (n for stmt in loop.body for n in ast.walk(stmt)):
        if isinstance(node, ast.Assign) and _is(node.value, value) and any(
                isinstance(t, ast.Attribute) and t.attr == "requires_grad"
                and isinstance(t.value, ast.Name) and t.value.id in names for t in node.targets):
            found.append(node)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "requires_grad_" and node.args \
                and _is(node.args[0], value) and isinstance(node.func.value, ast.Name) \
                and node.func.value.id in names:
            found.append(node)
    return found


def _is(node: ast.AST, value: bool) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def _loop_model(frame: FrameType, loop: ast.For) -> Any:
    """The module whose ``parameters()`` or ``named_parameters()`` the loop walks
    (``self.model.named_parameters()``), read from ``frame``; None otherwise."""
    it = loop.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
            and it.func.attr in ("parameters", "named_parameters")):
        return None
    value = read_path(frame, it.func.value)
    return value if callable(getattr(value, "parameters", None)) and \
        isinstance(getattr(value, "_modules", None), dict) else None
