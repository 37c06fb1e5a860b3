"""Which operation made a tensor, read from its ``grad_fn`` (no values touched, no sync).

Shape-only and dtype-only operations (view, reshape, squeeze, a dtype cast, ...) are looked through,
so ``softmax(x).view(-1, C)`` still reads as ``softmax``; so are operations that pick some of the
values unchanged (a slice, ``x[mask]``, ``x[idx]``, ``index_select``): ``softmax(x)[keep]``, the
rows kept for a loss, still holds softmax outputs.
"""

from __future__ import annotations

from typing import Any

_PASS_THROUGH = (
    "ViewBackward", "ReshapeAliasBackward", "UnsafeViewBackward", "SqueezeBackward",
    "UnsqueezeBackward", "ToCopyBackward", "CloneBackward", "PermuteBackward", "TransposeBackward",
    "ExpandBackward", "SliceBackward", "SelectBackward", "AliasBackward", "ContiguousBackward",
    "IndexBackward", "IndexSelectBackward",
)


def producer(tensor: Any, *, depth: int = 4) -> str | None:
    """The name of the autograd node that made ``tensor`` (``"SoftmaxBackward0"``), looking through up
    to ``depth`` shape-only operations; None when it has no ``grad_fn`` (made under ``no_grad``)."""
    node = producer_node(tensor, depth=depth)
    return type(node).__name__ if node is not None else None


def producer_node(tensor: Any, *, depth: int = 4) -> Any:
    """The autograd node :func:`producer` names (the node itself), or None. A slice of a
    concatenation along the same dimension (``torch.cat([xy, wh, conf, cls], -1)[..., 4:5]``, a
    detector's decoded head) is followed into the part it lies in, when the sizes of the parts
    around it can be read (:func:`_part_of_cat`)."""
    node = getattr(tensor, "grad_fn", None)
    for _ in range(depth):
        if node is None:
            return None
        if not type(node).__name__.startswith(_PASS_THROUGH):
            return node
        nxt = [fn for fn, _ in node.next_functions if fn is not None]
        if len(nxt) != 1:
            return None
        part = _part_of_cat(node, nxt[0])
        node = nxt[0] if part is None else part
    return node


def _part_of_cat(node: Any, cat: Any) -> Any:
    """For ``node`` a ``SliceBackward0``/``SelectBackward0`` whose input is ``cat`` (a
    ``CatBackward0`` along the same dimension): the node that made the part the slice lies in.
    The parts' sizes along that dimension are read from the nodes that save their result
    (``sigmoid``, ``exp``, ``tanh``, ``softmax``: ``_saved_result``), from both ends of the
    concatenation, while they can be; None when the slice is not found inside one part."""
    kind = type(node).__name__
    if type(cat).__name__ != "CatBackward0" or not kind.startswith(("SliceBackward",
                                                                     "SelectBackward")):
        return None
    try:
        sizes = list(node._saved_self_sym_sizes)
        dim = node._saved_dim % len(sizes)
        if cat._saved_dim % (2 ** 64) not in (dim, dim - len(sizes) + 2 ** 64):
            return None
        if kind.startswith("Slice"):
            if node._saved_step != 1:
                return None
            start, end = node._saved_start, min(node._saved_end, sizes[dim])
        else:
            start = node._saved_index % sizes[dim]
            end = start + 1
        parts = [fn for fn, _ in cat.next_functions]
        widths = [_width(fn, dim) for fn in parts]
    except (AttributeError, RuntimeError, TypeError, ZeroDivisionError):
        return None
    lo = 0  # from the front, while the parts' widths are known
    for fn, width in zip(parts, widths):
        if width is None:
            break
        if lo <= start and end <= lo + width:
            return fn
        lo += width
    hi = sizes[dim]  # from the back
    for fn, width in zip(reversed(parts), reversed(widths)):
        if width is None:
            break
        if hi - width <= start and end <= hi:
            return fn
        hi -= width
    return None


def _width(node: Any, dim: int) -> int | None:
    """The size along ``dim`` of the tensor ``node`` made, when it saves its result."""
    result = getattr(node, "_saved_result", None)
    shape = getattr(result, "shape", None)
    return int(shape[dim]) if shape is not None and len(shape) > dim else None


def shape(tensor: Any) -> str:
    return str(tuple(tensor.shape)) if hasattr(tensor, "shape") else type(tensor).__name__
