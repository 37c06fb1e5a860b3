"""Where an earlier backward's loss took in a module output whose graph it then freed.

Used by TG202 when a backward fails on a graph that an earlier backward of the same iteration
freed (a GAN's generator output given whole to the discriminator, whose backward frees the
generator's graph before the generator's own loss runs through it). The line to change is the
module call of the first loss that took the shared output in (``netD(fake)``: ``.detach()`` it
there), which may sit in a helper, a method or another cell, where the source alone cannot tie
it to the output.

The autograd graph ties them: the first loss is usually still held by a user variable (``loss_d =
update_critic(...)``, ``self.loss_D``). Its graph holds the output's node (stamped by the watcher
with a ``Made``), and above it the stamped output of the module call that consumed it. Of the
tensors in the live user frames' variables (not the failing backward's own graph), the stamped
node that reaches the shared output with no other stamped node between, made after it and before
the earlier backward ran, is that call; its stamp names the line.

Cost: only when such a backward fails: one walk of the failing graph and of the graphs the user
frames hold, :data:`~trainguard.sanitize.core.bounds.GRAPH_NODES` nodes in all.
"""

from __future__ import annotations

import ast
from types import FrameType
from typing import Any

from trainguard.sanitize.core.bounds import CONTAINER_ITEMS, GRAPH_NODES, Budget
from trainguard.sanitize.core.frames import Location, user_frames
from trainguard.sanitize.core.graph import graph_nodes, node_metadata
from trainguard.sanitize.core.holders import frame_tensors
from trainguard.sanitize.core.records import MADE
from trainguard.sanitize.core.source import SourceFile

__all__ = ["consumer_of"]


def _made(node: Any) -> Any:
    meta = node_metadata(node)
    return meta.get(MADE) if meta else None


def consumer_of(shared: Any, roots: tuple, before: int, start: FrameType | None
                ) -> tuple[Location, str] | None:
    """``(line, source)`` of the module call whose output, held in a graph of the user frames
    from ``start`` outwards, took the stamped output ``shared`` in directly; made after it and
    before backward call ``before`` ran (``Made.backward_count <= before``), and not part of the
    failing backward's ``roots``. None when there is not one such call (the earliest made is
    named when several are)."""
    budget = Budget(GRAPH_NODES)
    failing: set[int] = set()
    keep: list[Any] = []  # the walked nodes, alive while their ids are compared
    for root in roots:
        if getattr(root, "grad_fn", None) is not None:
            keep += graph_nodes(root.grad_fn, budget=budget)
    failing.update(id(n) for n in keep)
    found: dict[int, Any] = {}
    values = Budget(CONTAINER_ITEMS)
    for frame in user_frames(start):
        for _, _, tensor, _ in frame_tensors(frame, values):
            node = tensor.grad_fn
            if id(node) in failing or budget.spent:
                continue
            for current in graph_nodes(node, budget=budget):
                made = _made(current)
                if made is None or made is shared or id(current) in failing \
                        or id(made) in found:
                    continue
                if made.order > shared.order and made.backward_count <= before \
                        and _takes(current, shared, budget):
                    found[id(made)] = made
    if not found:
        return None
    first = min(found.values(), key=lambda m: m.order)
    return (first.where, _call_text(first)) if first.where is not None else None


def _call_text(made: Any) -> str:
    """The source of the call at ``made.where`` (``netD(blurred, fake)``), else ``Module(...)``."""
    path, line, col = made.where
    file = SourceFile.load(path)
    call = file.call_at(line, col - 1) if file is not None else None
    return ast.unparse(call) if call is not None else f"{made.module}(...)"


def _takes(node: Any, shared: Any, budget: Budget) -> bool:
    """Whether the graph below the stamped ``node`` reaches the node stamped ``shared`` before
    any other stamped node (the ops of one module call, and those between its inputs)."""
    for current in graph_nodes(node, limit=256, budget=budget,
                               stop=lambda n: n is not node and _made(n) is not None):
        if current is not node and _made(current) is shared:
            return True
    return False
