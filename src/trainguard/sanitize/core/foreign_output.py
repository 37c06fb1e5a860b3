"""Where a loss takes in the output of a module that another optimizer trains.

TG202 reads this when a backward repeated from the same line (a critic updated several times per
generator step, each update's backward on one line) runs into a module output made before those
repeats, whose saved tensors the first of them freed. When that module's parameters are not in
the optimizer that stepped after the first backward, but in another one (the generator's, stepped
after the repeats), this loss had no use for the module's graph: its gradient there is thrown away
by the next ``zero_grad``. The place to change is where the output enters this loss: of the
variables of the function calling ``backward`` whose graph reaches the freed output (the output
itself left out), the one assigned last before the ``backward`` line, the term nearest the loss
(``gp = penalty(critic, real, fake)``, beside ``critic(fake.detach())``).

Found from the live frame and the graph at the failed backward; nothing is called. Bounded: the
roots' graphs and each variable's, :data:`~trainguard.sanitize.core.bounds.GRAPH_NODES` nodes in
all.

Reference: KupynOrest/DeblurGAN#56 (a WGAN-GP critic updated several times per generator step,
"Backward twice when using wgan-gp as critic").
"""

from __future__ import annotations

import ast
from typing import Any

from trainguard.sanitize.core.bounds import GRAPH_NODES, Budget
from trainguard.sanitize.core.frames import Location, frame_location
from trainguard.sanitize.core.graph import graph_nodes, node_metadata
from trainguard.sanitize.core.records import MADE
from trainguard.sanitize.core.source import function_node

__all__ = ["foreign_entry"]


def foreign_entry(state: Any, optimizers: list[Any], roots: tuple, made: Any, frame: Any,
                  at: Location) -> tuple[Location, str, str, str] | None:
    """``(where, name, stepped, other)`` for the freed module output stamped ``made`` in the
    graph of ``roots``, a backward at ``at`` run from ``frame``: the assignment of ``name``, the
    variable of that frame that carries the output into the loss (see the module doc), when the
    module's trainable parameters are in an optimizer of the run (class ``other``) but not in the
    one that stepped last (class ``stepped``); ``optimizers``: those built or stepped in the run
    (``state``: the run's). None otherwise."""
    trainers = _trainers(state, optimizers, made.model_id)
    if trainers is None or frame is None or frame_location(frame)[:2] != at[:2]:
        return None
    budget = Budget(GRAPH_NODES)
    freed = _stamped_node(roots, made, budget)
    if freed is None:
        return None
    import torch

    root_ids = {id(t) for t in roots}
    reaching = []
    for name, value in list(frame.f_locals.items()):
        if not isinstance(value, torch.Tensor) or value.grad_fn is None \
                or id(value) in root_ids or value.grad_fn is freed:
            continue
        if any(node is freed for node in graph_nodes(value.grad_fn, budget=budget)):
            reaching.append(name)
    found = _last_assignment(frame.f_code, reaching, at[1])
    return (found[0], found[1], *trainers) if found is not None else None


def _trainers(state: Any, optimizers: list[Any], model_id: Any) -> tuple[str, str] | None:
    """``(stepped, other)``: the class of the optimizer whose step returned last, which holds
    none of the trainable parameters of the module ``id`` ``model_id``, and of another optimizer
    of the run that holds some; None when there are no such two."""
    module = next((m for model in list(state.models) for m in model.modules()
                   if id(m) == model_id), None) if model_id is not None else None
    params = {id(p) for p in module.parameters() if p.requires_grad} if module is not None \
        else set()
    stepped, other = None, None
    for optimizer in {id(o): o for o in optimizers}.values():
        holds = any(id(p) in params for g in optimizer.param_groups for p in g["params"])
        if id(optimizer) == state.last_stepped:
            if holds:
                return None
            stepped = optimizer
        elif holds:
            other = optimizer
    if stepped is None or other is None:
        return None
    return type(stepped).__name__, type(other).__name__


def _stamped_node(roots: tuple, made: Any, budget: Budget) -> Any:
    """The node of the roots' graphs whose metadata holds the stamp ``made``, or None."""
    for root in roots:
        if getattr(root, "grad_fn", None) is None:
            continue
        for node in graph_nodes(root.grad_fn, budget=budget):
            meta = node_metadata(node)
            if meta and meta.get(MADE) is made:
                return node
    return None


def _last_assignment(code: Any, names: list[str], before: int) -> tuple[Location, str] | None:
    """``(location, name)`` of the last assignment, in the function running ``code`` (not in a
    function inside it) and on a line before ``before``, to one of ``names``."""
    scope = function_node(code)
    if scope is None or not names:
        return None
    best = None
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        todo.extend(ast.iter_child_nodes(node))
        if not isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) \
                or node.lineno >= before:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Name) and leaf.id in names and \
                        (best is None or node.lineno > best[0][1]):
                    best = ((code.co_filename, node.lineno, node.col_offset + 1), leaf.id)
    return best
