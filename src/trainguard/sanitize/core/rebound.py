"""A trained tensor rebound by its own update, read from the source at a failed backward.

A hand-written update that assigns a new tensor to the name of the one it trains
(``w = w - lr * w.grad`` under ``torch.no_grad()``, or ``(w - lr * w.grad).detach()``) leaves the
name bound to a tensor that does not require grad: the next forward builds nothing to
differentiate and its ``backward`` raises "element 0 of tensors does not require grad" (TG204). An
in-place update (``w -= lr * w.grad``, ``w.sub_(...)``) keeps the leaf.

Proof, on the failed backward only: a statement of the function that called ``backward`` assigns a
name (or ``self.w``) from an expression reading that name's ``.grad`` (so the tensor once had a
gradient, and required grad), and the name now holds a floating tensor that does not require grad.

Cost: on the failed backward only, one walk of that function's parsed source.

Reference: "Locally disabling gradient computation" in
https://pytorch.org/docs/stable/notes/autograd.html (results computed under ``no_grad`` have
``requires_grad=False``).
"""

from __future__ import annotations

import ast
from types import FrameType
from typing import Any, Iterator

from trainguard.sanitize.core.frames import Location
from trainguard.sanitize.core.sites import dotted
from trainguard.sanitize.core.source import function_node

__all__ = ["rebound_in_source"]

_MISSING = object()


def rebound_in_source(frame: FrameType) -> tuple[str, Location] | None:
    """``(name, location)`` of the first assignment in ``frame``'s function that rebinds a name
    from its own ``.grad`` to a tensor that no longer requires grad; else None."""
    function = function_node(frame.f_code)
    if function is None:
        return None
    scope = {**frame.f_globals, **frame.f_locals}
    found: list[tuple[int, int, str]] = []
    for node in _walk(function):
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            continue
        graded = _graded(node.value)
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for element in (target.elts if isinstance(target, ast.Tuple) else [target]):
                name = dotted(element)
                if name in graded and _lost_grad(_resolve(scope, name)):
                    found.append((node.lineno, node.col_offset + 1, name))
    if not found:
        return None
    line, col, name = min(found)
    return name, (frame.f_code.co_filename, line, col)


def _walk(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``function``'s own body, without those of nested functions and classes."""
    todo = list(ast.iter_child_nodes(function))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield node
        todo.extend(ast.iter_child_nodes(node))


def _graded(value: ast.AST) -> set[str]:
    """The dotted names whose ``.grad`` ``value`` reads (``w.grad``: ``w``)."""
    out = set()
    for node in ast.walk(value):
        if isinstance(node, ast.Attribute) and node.attr == "grad":
            name = dotted(node.value)
            if name is not None:
                out.add(name)
    return out


def _resolve(scope: dict, dotted: str) -> Any:
    head, *rest = dotted.split(".")
    value = scope.get(head, _MISSING)
    for attr in rest:
        if value is _MISSING:
            break
        try:
            value = getattr(value, attr, _MISSING)
        except Exception:  # a property that raises: nothing to learn from it
            return _MISSING
    return value


def _lost_grad(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor) and not value.requires_grad \
        and (value.is_floating_point() or value.is_complex())
