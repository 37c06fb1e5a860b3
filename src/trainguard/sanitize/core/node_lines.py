"""The user's line that made an autograd node, found one cycle later.

A check that found the node at fault in a loss's graph (TG405: a division whose denominator
holds 0, a log of 0, between the model's output and the loss) knows its type but not its line:
``grad_fn`` carries no source position unless anomaly mode was on. The same code builds the same
graph at the next step, so the node's *route* from the root (the input index taken at each node,
``next_functions``) names the same op then. :class:`NodeLine` keeps the route, follows the next
cycle (up to the next ``backward`` from the same line) under a ``TorchFunctionMode`` that notes,
for each op's output, the node's type and the user's line that called the op, and at that
``backward`` follows the route in the new graph: a node of the same type there gives the line.

For a product whose saved factor needs no gradient and is already NaN/Inf, the same cycle also
keeps a :class:`~trainguard.sanitize.core.nonfinite_trail.Trail` of the non-finite outputs that
need no gradient, and the line given is the first op on that factor's trail.

Nothing is held between ops but ids, type names and locations (no node, no tensor: no graph is
kept alive); a node made inside a composite op that the mode does not see is checked by its type
name, so a stale entry is not taken for it.

Cost: once per run, after the finding: one walk of the graph (bounded) and one cycle with a Python
call per torch op. Values are never touched.

Reference: ``torch.autograd.detect_anomaly`` (records a traceback for every node, at a far greater
cost) https://pytorch.org/docs/stable/autograd.html#anomaly-detection.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from trainguard.sanitize.core.frames import Location, short_location
from trainguard.sanitize.core.nonfinite_trail import Trail
from trainguard.sanitize.core.tracing import TraceSlot, bounded_mode, op_name, tensors

__all__ = ["route", "follow", "NodeLine"]

_NODES = 20_000  # nodes walked at most to find the route
_OPS = 50_000  # ops noted at most in the traced cycle


def route(root: Any, node: Any) -> tuple[int, ...] | None:
    """The ``next_functions`` indices from ``root``'s ``grad_fn`` to ``node`` (breadth first, the
    shortest), or None."""
    start = getattr(root, "grad_fn", None)
    if start is None:
        return None
    parent: dict[int, tuple[Any, int]] = {id(start): (None, -1)}
    keep = [start]  # alive during the walk, so that the ids stay unique
    queue = deque([start])
    while queue and len(keep) < _NODES:
        current = queue.popleft()
        if current is node:
            path = []
            key = id(current)
            while parent[key][0] is not None:
                up, index = parent[key]
                path.append(index)
                key = id(up)
            return tuple(reversed(path))
        for index, (nxt, _) in enumerate(getattr(current, "next_functions", ())):
            if nxt is not None and id(nxt) not in parent:
                parent[id(nxt)] = (current, index)
                keep.append(nxt)
                queue.append(nxt)
    return None


def follow(root: Any, path: tuple[int, ...]) -> Any:
    """The node reached from ``root``'s ``grad_fn`` by ``path``, or None."""
    node = getattr(root, "grad_fn", None)
    for index in path:
        nexts = getattr(node, "next_functions", ()) if node is not None else ()
        if index >= len(nexts):
            return None
        node = nexts[index][0]
    return node


def _trace(factors: bool) -> Any:
    import torch

    tensor = torch.Tensor

    class NodeTrace(bounded_mode()):
        limit = _OPS

        def __init__(self, factors: bool) -> None:
            super().__init__()
            self.made: dict[int, tuple[str, str, Location | None]] = {}  # id(node) -> its op
            self.factors = factors
            self.trail = Trail()

        def _follow(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
            outs = [t for t in (out if isinstance(out, (tuple, list)) else (out,))[:4]
                    if isinstance(t, tensor)]
            where = self.caller()
            for t in outs:
                node = t.grad_fn
                if node is not None:
                    self.made[id(node)] = (type(node).__name__, getattr(func, "__name__", "op"),
                                           where)
            if self.factors:  # (a product's non-finite constant factor: where it came from)
                self.trail.note(op_name(func), [t for a in (*args, *kwargs.values())
                                                for t in tensors(a)], outs, where)

        def clear(self) -> None:
            self.made.clear()
            self.trail.clear()

    return NodeTrace(factors)


class NodeLine(TraceSlot):
    """One node's route (see the module doc), resolved at a later backward from ``line``."""

    def __init__(self, root: Any, node: Any) -> None:
        self.path = route(root, node)
        self.kind = type(node).__name__
        self.line: Any = None  # the backward whose loss holds the node
        self.held: tuple | None = None  # (message, fix, where) of the finding that waits
        self.waited = 0

    def hold(self, message: str, fix: str, where: Any) -> None:
        """Keep a finding, reported at ``where`` (a backward line), until the op's line is known;
        :meth:`start` at the next model forward, :meth:`at_backward` at each backward."""
        self.line = where
        self.held = (message, fix, where)

    def flush(self) -> tuple | None:
        """The held finding (the run ended first), and the trace closed. For a product with a
        non-finite factor, the one log-probability product of the loss's code is the place
        (:func:`~trainguard.sanitize.core.singular_sites.one_log_product`); for a log of 0, the
        one unguarded call of ``log`` there (the function holding the line, one level down)."""
        held, self.held = self.held, None
        self.close()
        if held is not None and self.kind == "MulBackward0":
            from trainguard.sanitize.core.singular_sites import one_log_product

            at = one_log_product(held[2])
            if at is not None:
                held = (f"{held[0]}; the one product with a log-probability factor in the loss's "
                        f"code is at {short_location(at)}", held[1], at)
        elif held is not None and self.kind == "LogBackward0":
            from trainguard.sanitize.core.singular_sites import singular_sites

            logs = singular_sites([], held[2], logs=True)
            if len(logs) == 1:  # the one unguarded log of the loss's code (``log(1 - p)``)
                at, op = logs[0]
                held = (f"{held[0]}; the one `{op}` of the loss's code with nothing keeping its "
                        f"input off 0 is at {short_location(at)}", held[1], at)
        return held

    @property
    def usable(self) -> bool:
        return self.path is not None

    def start(self) -> None:
        """Open the trace (at a model forward while a finding is held); else take a closed one
        off the mode stack."""
        self.settle()
        if self.usable and self.trace is None and self.held is not None:
            self.trace = _trace(self.kind == "MulBackward0")
            self.trace.__enter__()

    def at_backward(self, roots: tuple, line: Any) -> tuple | None:
        """The held finding once it can be placed: at the next backward from the same line (or
        after 8 others), at the op's line when the route leads to a node of the same type that
        the trace saw made (its op named in the message), else as held; None before that."""
        self.settle()
        self.waited += 1
        if line != self.line and self.waited < 8 or self.held is None:
            return None
        message, fix, where = self.held
        trace = self.trace
        node = follow(roots[0], self.path) if trace is not None and len(roots) == 1 else None
        made = trace.made.get(id(node)) if node is not None else None
        came = _factor_origin(trace, node) if made is not None else None
        if came is not None:  # a product's factor made non-finite earlier: where it came from
            message += came[0]
            where = came[1]
        elif made is not None and made[0] == self.kind == type(node).__name__ and made[2]:
            message += f"; that op is `{made[1]}` at {short_location(made[2])}"
            where = made[2]
        self.flush()
        return message, fix, where


def _factor_origin(trace: Any, node: Any) -> tuple[str, Location] | None:
    """For a ``MulBackward0`` ``node`` with a saved factor that needs no gradient and holds
    NaN/Inf, the first op on its trail in the traced cycle (``core/nonfinite_trail.py``), as
    ``(clause, its line)``; else None."""
    if not trace.factors or type(node).__name__ != "MulBackward0":
        return None
    for attr in ("_saved_other", "_saved_self"):
        try:
            factor = getattr(node, attr)
        except Exception:  # freed, or not saved for this product
            continue
        found = trace.trail.origin(factor) if getattr(factor, "grad_fn", 1) is None else None
        if found is None or found[1] is None:
            continue
        op, at, made = found
        if made:
            return (f"; its factor that is already NaN/Inf was made from finite values by "
                    f"`{op}` at {short_location(at)}"), at
        return (f"; its factor that is already NaN/Inf comes from `{op}` at {short_location(at)},"
                " whose inputs were NaN/Inf before the step began (values kept across steps, "
                "such as running statistics, or the batch)"), at
    return None
