"""Walking an autograd graph, bounded: the nodes below a ``grad_fn`` and what their metadata holds.

Every walk visits at most :data:`~trainguard.sanitize.core.bounds.GRAPH_NODES` nodes (or what a
shared :class:`~trainguard.sanitize.core.bounds.Budget` has left) and reads the watchdog's clock
every few hundred nodes (``check_deadline``), so a check's walk ends in bounded time.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from trainguard.sanitize.core.bounds import GRAPH_NODES, Budget, check_deadline
from trainguard.sanitize.core.records import MADE, first_tensor

__all__ = ["ROOT", "LOSS_OUT", "KEPT", "kept_at", "graph_nodes", "node_metadata", "graph_stamps",
           "graph_metadata", "stamped_models", "weighs_losses", "stamp_of", "stamp_by_storage",
           "freed_metadata"]

ROOT = "trainguard.root"
"""Metadata key on a backward root's ``grad_fn``; the value is a :class:`~trainguard.sanitize.core.records.Made`."""

LOSS_OUT = "trainguard.loss"
"""Metadata key on the ``grad_fn`` of a watched loss's output (TG304 marks them); the value is True."""

KEPT = "trainguard.kept"
"""Metadata key on the nodes near the roots of a ``torch.autograd.grad`` call made with
``create_graph=True`` (or ``retain_graph=True``) in a region where grad was turned back on
inside a ``no_grad`` block, and on the ``grad_fn`` of the gradients it returned: ``(the user's
line of that call, which kept those graphs alive, whether the node is a gradient's)`` (TG104)."""

_CLOCK_EVERY = 256  # nodes between two readings of the watchdog's clock


def kept_at(tensor: Any) -> Any:
    """The line of the ``torch.autograd.grad`` call that kept ``tensor``'s graph (:data:`KEPT`):
    on its own ``grad_fn`` (a root's graph the call retained), or a few nodes below it on a
    gradient the call returned with ``create_graph=True`` (``forces = -grads[0]``: a graph only
    ``create_graph`` made); None otherwise (a value computed on top of a retained graph, such as
    ``softmax`` of the logits whose gradient was taken, has a graph of its own)."""
    node = tensor.grad_fn
    meta = node_metadata(node) if node is not None else None
    if meta and KEPT in meta:
        return meta[KEPT][0]
    for current in graph_nodes(node, limit=8) if node is not None else ():
        meta = node_metadata(current)
        if meta and KEPT in meta and meta[KEPT][1]:
            return meta[KEPT][0]
    return None


def graph_nodes(node: Any, *, limit: int = GRAPH_NODES,
                stop: Callable[[Any], bool] | None = None,
                budget: Budget | None = None) -> Iterator[Any]:
    """The autograd nodes of the graph below ``node`` (``node`` first), each once, at most
    ``limit`` of them (and at most what ``budget`` has left, which the walk spends); the walk does
    not go past a node for which ``stop(node)`` is true. Past the bound it ends (``budget.spent``
    says so) with what it has yielded."""
    check_deadline()  # (also between many small walks)
    by_budget = budget is not None and budget.left <= limit  # (the budget, not limit, ends it)
    if budget is not None:
        limit = min(limit, budget.left)
    seen: set[int] = set()
    frontier = [node]
    keep: list[Any] = []  # keep wrappers alive so that ids stay unique during the walk
    try:
        while frontier:
            current = frontier.pop()
            if current is None or id(current) in seen:
                continue
            if len(seen) >= limit:
                if by_budget:
                    budget.spent = True  # type: ignore[union-attr]
                return
            seen.add(id(current))
            if not len(seen) % _CLOCK_EVERY:
                check_deadline()
            keep.append(current)
            yield current
            if stop is not None and stop(current):
                continue
            for nxt, _ in getattr(current, "next_functions", ()):
                if nxt is not None:
                    frontier.append(nxt)
    finally:
        if budget is not None:
            budget.left -= len(seen)


def node_metadata(node: Any) -> dict | None:
    """``node.metadata`` (created empty on first access), or None for a node type without it."""
    try:
        return node.metadata
    except (AttributeError, RuntimeError):
        return None


def graph_stamps(node: Any, *, limit: int = GRAPH_NODES, budget: Budget | None = None,
                 stop: Callable[[Any], bool] | None = None) -> list[Any]:
    """The :class:`Made` stamps (outermost outputs and backward roots) in the graph below ``node``
    (at most ``limit`` nodes visited, and what ``budget`` allows; not past a node for which
    ``stop`` is true)."""
    found: list[Any] = []
    for current in graph_nodes(node, limit=limit, budget=budget, stop=stop):
        meta = node_metadata(current)
        if meta:
            for key in (MADE, ROOT):
                if key in meta:
                    found.append(meta[key])
    return found


def graph_metadata(node: Any, key: str, *, limit: int = GRAPH_NODES,
                   budget: Budget | None = None) -> list[Any]:
    """The values stored under ``key`` in the metadata of the nodes below ``node`` (at most
    ``limit`` nodes visited, and what ``budget`` allows)."""
    found: list[Any] = []
    for current in graph_nodes(node, limit=limit, budget=budget):
        meta = node_metadata(current)
        if meta and key in meta:
            found.append(meta[key])
    return found


def freed_metadata(node: Any, key: str, *, budget: Budget | None = None) -> list[Any]:
    """The values stored under ``key`` on the nodes below ``node`` whose saved tensors a backward
    has freed: reading one of the node's ``_saved_*`` attributes raises (PyTorch's "Trying to
    backward through the graph a second time (or directly access saved tensors after they have
    already been freed)"). A node that saved nothing proves nothing and is left out."""
    found: list[Any] = []
    for current in graph_nodes(node, budget=budget):
        meta = node_metadata(current)
        if meta and key in meta and _freed(current):
            found.append(meta[key])
    return found


def _freed(node: Any) -> bool:
    for name in dir(node):
        if name.startswith("_saved_"):
            try:
                getattr(node, name)
            except RuntimeError:
                return True
            except Exception:  # another failure says nothing about freeing
                continue
    return False


def weighs_losses(output: Any, model_id: int, limit: int = 64) -> bool:
    """Whether the graph of a tensor in ``output`` (an outermost call's) combines a watched loss's
    output with a leaf that requires grad (a parameter) used after it: the walk stops at loss
    outputs and at other models' outputs."""
    for tensor in first_tensor(output):
        if tensor.grad_fn is None:
            continue
        found = {"loss": False, "leaf": False}

        def stop(node: Any, found: dict = found) -> bool:
            meta = node_metadata(node)
            if meta:
                if meta.get(LOSS_OUT):
                    found["loss"] = True
                    return True
                made = meta.get(MADE)
                if made is not None and made.model_id != model_id:
                    return True
            if hasattr(node, "variable"):  # AccumulateGrad: a leaf's gradient
                found["leaf"] = True
            return False

        for _ in graph_nodes(tensor.grad_fn, limit=limit, stop=stop):
            pass
        if found["loss"] and found["leaf"]:
            return True
    return False


def stamped_models(tensor: Any, limit: int = 32, losses: list[bool] | None = None) -> set[int]:
    """``id()`` of the models whose outermost outputs ``tensor`` was computed from most directly:
    the ``Made`` stamps nearest to its ``grad_fn`` (the walk stops at each stamp, and after
    ``limit`` nodes). A watched loss's output met on the way appends True to ``losses``."""
    found: set[int] = set()

    def stamped(node: Any) -> bool:
        meta = node_metadata(node)  # a node type without metadata: looked past
        if not meta:
            return False
        if losses is not None and not losses and meta.get(LOSS_OUT):
            losses.append(True)
        made = meta.get(MADE)
        if made is None:
            return False
        if made.model_id is not None:
            found.add(made.model_id)
        return True

    for _ in graph_nodes(tensor.grad_fn, limit=limit, stop=stamped):
        pass
    return found


def stamp_by_storage(tensor: Any, stamps: list[Any], limit: int = 64) -> Any:
    """The latest of the last ``limit`` live stamps whose output ``tensor`` shares its memory
    with (``tensor`` is that output detached: ``D(fake.detach())``), or None."""
    try:
        ptr = tensor.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # a tensor without storage
        return None
    for ref in reversed(stamps[-limit:]):
        made = ref()
        out = made.output() if made is not None and made.output is not None else None
        if out is not None and out.shape == tensor.shape and made.model_id is not None:
            try:
                if out.untyped_storage().data_ptr() == ptr:
                    return made
            except (RuntimeError, NotImplementedError):
                continue
    return None


def stamp_of(tensor: Any) -> Any:
    """The stamp on ``tensor``'s ``grad_fn``: the outermost call whose output it is, or None."""
    meta = node_metadata(tensor.grad_fn) if tensor.grad_fn is not None else None
    made = meta.get(MADE) if meta else None
    return made if made is not None and made.model_id is not None else None
