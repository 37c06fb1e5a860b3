"""Which operation made a tensor, read from its ``grad_fn`` (no values touched, no sync).

Shape-only and dtype-only operations (view, reshape, squeeze, a dtype cast, ...) are looked through,
so ``softmax(x).view(-1, C)`` still reads as ``softmax``.
"""

from __future__ import annotations

from typing import Any

_PASS_THROUGH = (
    "ViewBackward", "ReshapeAliasBackward", "UnsafeViewBackward", "SqueezeBackward",
    "UnsqueezeBackward", "ToCopyBackward", "CloneBackward", "PermuteBackward", "TransposeBackward",
    "ExpandBackward", "SliceBackward", "SelectBackward", "AliasBackward", "ContiguousBackward",
)


def producer(tensor: Any, *, depth: int = 4) -> str | None:
    """The name of the autograd node that made ``tensor`` (``"SoftmaxBackward0"``), looking through up
    to ``depth`` shape-only operations; None when it has no ``grad_fn`` (made under ``no_grad``)."""
    node = getattr(tensor, "grad_fn", None)
    for _ in range(depth):
        if node is None:
            return None
        name = type(node).__name__
        if not name.startswith(_PASS_THROUGH):
            return name
        nxt = [fn for fn, _ in node.next_functions if fn is not None]
        node = nxt[0] if len(nxt) == 1 else None
    return type(node).__name__ if node is not None else None


def producer_node(tensor: Any, *, depth: int = 4) -> Any:
    """The autograd node :func:`producer` names (the node itself), or None."""
    node = getattr(tensor, "grad_fn", None)
    for _ in range(depth):
        if node is None:
            return None
        if not type(node).__name__.startswith(_PASS_THROUGH):
            return node
        nxt = [fn for fn, _ in node.next_functions if fn is not None]
        node = nxt[0] if len(nxt) == 1 else None
    return node


def shape(tensor: Any) -> str:
    return str(tuple(tensor.shape)) if hasattr(tensor, "shape") else type(tensor).__name__
