"""A module's own tensors kept between calls: a recurrent state its ``forward`` reads and stores
again (``out, self.hidden = self.lstm(x, self.hidden)``), and what a module attribute holds.

TG202 reads these when a backward runs into a graph an earlier backward freed and no module
output made before it explains the failure: a state or cache kept on a module is then the tensor
carried across steps. Source (the class's ``forward``) and the live modules only; nothing is
called.
"""

from __future__ import annotations

import ast
from typing import Any

from trainguard.sanitize.core.bounds import Budget
from trainguard.sanitize.core.graph import graph_nodes
from trainguard.sanitize.core.source import function_node

__all__ = ["carried_state", "read_and_stored", "kept_tensors"]


def carried_state(models: Any, nodes: set[int], budget: Budget) -> tuple[str, Any] | None:
    """``("Net.hidden", line)`` for a module whose ``forward`` reads and stores ``self.hidden``
    (``out, self.hidden = self.lstm(x, self.hidden)``) and whose stored value's graph meets the
    failing one below its own top: the state this step's forward took in, and stored again with
    the old graph beneath it (an RNN's hidden state kept on the module)."""
    carried: dict[type, dict[str, Any]] = {}  # class -> attr -> where its forward stores it
    for model in list(models):
        for module in model.modules():
            cls = type(module)
            if cls not in carried:
                carried[cls] = read_and_stored(cls)
            for attr, where in carried[cls].items():
                for v in kept_tensors(vars(module).get(attr)):
                    if v.grad_fn is not None and any(
                            id(n) in nodes and not hasattr(n, "variable")
                            for n in list(graph_nodes(v.grad_fn, budget=budget))[1:]):
                        return f"{cls.__name__}.{attr}", where
    return None


def read_and_stored(cls: type) -> dict[str, Any]:
    """``attr -> location`` of the first store of each ``self.<attr>`` that ``cls.forward`` both
    reads and stores (in the user's code)."""
    code = getattr(getattr(cls, "forward", None), "__code__", None)
    node = function_node(code) if code is not None else None
    if node is None or isinstance(node, ast.Module):
        return {}
    stored: dict[str, ast.stmt] = {}  # attr -> its first store in forward
    for n in ast.walk(node):
        if isinstance(n, (ast.Assign, ast.AugAssign)):
            for target in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                for t in ast.walk(target):
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) \
                            and t.value.id == "self":
                        stored.setdefault(t.attr, n)
    read = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
            and isinstance(n.ctx, ast.Load) and isinstance(n.value, ast.Name)
            and n.value.id == "self"}
    return {attr: (code.co_filename, stored[attr].lineno, stored[attr].col_offset + 1)
            for attr in sorted(set(stored) & read)}


def kept_tensors(value: Any) -> list[Any]:
    """The tensors a module attribute holds: itself, or a recurrent state kept as a tuple (h, c)."""
    import torch

    kept = value if isinstance(value, (tuple, list)) and len(value) <= 4 else (value,)
    return [v for v in kept if isinstance(v, torch.Tensor)]
