"""The in-place statements of the user's functions, and the tensors an in-place error's message
may name without an op, for TG207.

``inplace_statements`` reads a function's ``x += ...``, ``x[i] = ...``, ``x.add_(...)`` and
``f(x, inplace=True)`` statements, each with the name it changes. ``changed_leaves`` finds, among
the live modules' tensor attributes and buffers and the variables of the traceback's user frames,
those the message describes: PyTorch names no op when the saved tensor had no history (a tensor
that needs no grad, ``self.history = torch.zeros(...)``), so its shape and version counter are
what tell which of them it is.
"""

from __future__ import annotations

import ast
from types import FrameType
from typing import Any

__all__ = ["inplace_statements", "target_name", "changed_leaves"]

_MODULES = 256  # submodules of each model read for tensor attributes


def target_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


_AUG_OPS = {"Add": "add", "Sub": "sub", "Mult": "mul", "Div": "div", "Pow": "pow"}


def _walk_own(func: ast.AST) -> list[ast.AST]:
    """The nodes of ``func`` itself: a module's own statements skip nested defs and classes."""
    if not isinstance(func, ast.Module):
        return list(ast.walk(func))
    out: list[ast.AST] = []
    stack = list(func.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        out.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return out


_NUMBER_METHODS = frozenset({"item", "tolist", "numel", "size", "dim"})
_NUMBER_BUILTINS = frozenset({"float", "int", "len", "round", "abs", "bool"})


def _python_number(expr: ast.AST) -> bool:
    """Whether ``expr`` is a Python number for sure (``loss.item()``, ``1``, ``len(x) * 2``)."""
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool)
    if isinstance(expr, ast.UnaryOp):
        return _python_number(expr.operand)
    if isinstance(expr, ast.BinOp):
        return _python_number(expr.left) and _python_number(expr.right)
    if isinstance(expr, ast.Call):
        func = expr.func
        if isinstance(func, ast.Attribute):
            return func.attr in _NUMBER_METHODS
        return isinstance(func, ast.Name) and func.id in _NUMBER_BUILTINS
    return False


def _held(node: ast.AST) -> str | None:
    """What a changed target holds, to match with :func:`changed_leaves`: ``.history`` for
    ``self.history[i]``, ``mask`` for ``mask``."""
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute):
        return "." + node.attr
    return node.id if isinstance(node, ast.Name) else None


Statement = tuple[int, int, "str | None", str, str, "str | None"]


def inplace_statements(func: ast.AST) -> list[Statement]:
    """``(line, col, modified name, what, op, held)`` for each in-place statement in ``func``
    (``held``: see :func:`_held`)."""
    out = []
    for node in _walk_own(func):
        if isinstance(node, ast.AugAssign):
            if _python_number(node.value) and any(
                    isinstance(n, ast.Call) for n in ast.walk(node.value)):
                continue  # ``running += loss.item()``: a Python number grows, no tensor
                # (``gate -= 0.5`` may change a tensor: a constant alone tells nothing)
            op = _AUG_OPS.get(type(node.op).__name__, type(node.op).__name__.lower())
            if isinstance(node.target, ast.Subscript):
                op = "copyslices"  # (``out[i] += y`` changes ``out`` through a view of it)
            out.append((node.lineno, node.col_offset + 1, target_name(node.target),
                        f"`{ast.unparse(node)}`", op, _held(node.target)))
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript)
                                                  for t in node.targets):
            target = next(t for t in node.targets if isinstance(t, ast.Subscript))
            out.append((node.lineno, node.col_offset + 1, target_name(target),
                        f"`{ast.unparse(target)} = ...`", "copyslices", _held(target)))
        elif isinstance(node, ast.Call):
            func_node = node.func
            if (isinstance(func_node, ast.Attribute) and func_node.attr.endswith("_")
                    and not func_node.attr.endswith("__") and func_node.attr != "requires_grad_"):
                out.append((node.lineno, node.col_offset + 1, target_name(func_node.value),
                            f"`.{func_node.attr}()`", func_node.attr.rstrip("_"),
                            _held(func_node.value)))
            elif any(k.arg == "inplace" and isinstance(k.value, ast.Constant) and k.value.value
                     for k in node.keywords):
                name = target_name(node.args[0]) if node.args else None
                callee = ast.unparse(func_node).rsplit(".", 1)[-1].lower()
                out.append((node.lineno, node.col_offset + 1, name,
                            f"`{ast.unparse(func_node)}(..., inplace=True)`", callee,
                            _held(node.args[0]) if node.args else None))
    # (two in-place calls chained on one line share its position; one may have no name)
    return sorted(set(out), key=lambda t: (t[0], t[1], t[2] or "", t[3], t[4], t[5] or ""))




def changed_leaves(models: list[Any], frames: list[FrameType], shape: tuple[int, ...],
                   version: int) -> dict[str, str]:
    """The tensors that need no grad, of ``shape`` and at ``version``, held by the models'
    modules (plain attributes and buffers: key ``.name``) or by the variables of ``frames``
    (key ``name``), each with a label for messages (```self.history` of CoverageAttention``)."""
    import torch

    def fits(value: Any) -> bool:
        return (isinstance(value, torch.Tensor) and not value.requires_grad
                and tuple(value.shape) == shape and value._version == version)

    found: dict[str, str] = {}
    for model in models:
        for sub in list(model.modules())[:_MODULES]:
            for attr, value in [*vars(sub).items(), *sub._buffers.items()]:
                if fits(value):
                    found.setdefault("." + attr, f"`self.{attr}` of {type(sub).__name__}")
    for frame in frames:
        for name, value in list(frame.f_locals.items()):
            if fits(value):
                found.setdefault(name, f"`{name}`")
    return found
