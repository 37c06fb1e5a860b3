"""Walking a backward graph: ``grad_fn`` nodes, their ``next_functions`` and the leaves they reach.

Facts relied on (PyTorch autograd mechanics, https://pytorch.org/docs/stable/notes/autograd.html):
every tensor produced by a differentiable op has a ``grad_fn`` node; ``node.next_functions`` lists
``(node, input_nr)`` pairs towards the inputs, ``None`` for inputs that need no gradient; a leaf that
requires grad appears as an ``AccumulateGrad`` node whose ``.variable`` is the leaf tensor itself.
"""

from __future__ import annotations

from typing import Any, Iterator

import torch

__all__ = ["ZERO_GRAD_NODES", "children", "leaf_of", "iter_nodes", "leaves_behind"]

# Backward nodes of ops whose derivative is zero almost everywhere: a path through them is
# connected in the graph but carries no gradient (torch.round's gradient is all zeros, see
# tools/autograd/derivatives.yaml: "round: zeros_like(grad)").
ZERO_GRAD_NODES = frozenset({
    "RoundBackward0", "RoundBackward1", "FloorBackward0", "CeilBackward0", "TruncBackward0",
    "SignBackward0", "SgnBackward0",
})


def children(node: Any) -> list[Any]:
    """The non-None nodes in ``node.next_functions``."""
    return [child for child, _ in getattr(node, "next_functions", ()) if child is not None]


def leaf_of(node: Any) -> torch.Tensor | None:
    """The leaf tensor of an ``AccumulateGrad`` node, else None."""
    return getattr(node, "variable", None) if type(node).__name__ == "AccumulateGrad" else None


def iter_nodes(root: Any, *, stop_at: frozenset[str] = frozenset()) -> Iterator[Any]:
    """Every node reachable from ``root`` once (depth-first, iterative); nodes whose type name is in
    ``stop_at`` are yielded but not crossed."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        if type(node).__name__ not in stop_at:
            stack.extend(children(node))


def leaves_behind(value: Any, *, stop_at: frozenset[str] = frozenset()) -> set[int]:
    """``id``s of the leaf tensors that require grad reachable from a node or a tensor."""
    if isinstance(value, torch.Tensor):
        if value.grad_fn is None:
            return {id(value)} if value.requires_grad else set()
        value = value.grad_fn
    found = set()
    for node in iter_nodes(value, stop_at=stop_at):
        leaf = leaf_of(node)
        if leaf is not None:
            found.add(id(leaf))
    return found
