"""The parameters TG205 suspects: given to an optimizer, trainable, and without a gradient over
its first steps.

A parameter is a suspect when at each of those steps its ``.grad`` is None, or, where values are
read at once (CPU, ``core/values.py``), a tensor of zeros only: a parameter whose only remaining
path to the loss is weighted by zero (a regulariser's coefficient of 0 while the term meant to
train it was rebuilt from ``.item()`` values). Suspects are then followed to the end of the run by post-accumulate-grad
hooks (``Tensor.register_post_accumulate_grad_hook``): any gradient later clears a suspect
without one (a head trained after a warm-up, a task sampled later), and any gradient with a
non-zero entry clears a zero-gradient suspect (read on the CPU, suspects only).

A zero gradient alone proves no cut (a coefficient of 0 on purpose, an ablation): TG205 reports
zero-gradient suspects only with the cause found (:attr:`Suspects.cut` or ``number``).
"""

from __future__ import annotations

from typing import Any

from trainguard.sanitize.core.number_cuts import NUMBER_OPS

__all__ = ["Suspects", "without_gradient"]


def without_gradient(params: list[Any]) -> tuple[set[int], set[int]]:
    """``(missing, zero)``: the ids of ``params`` whose ``.grad`` is None, and of those whose
    ``.grad`` is a CPU tensor of zeros only (one reduction per parameter)."""
    missing: set[int] = set()
    zero: set[int] = set()
    for p in params:
        g = p.grad
        if g is None:
            missing.add(id(p))
        elif g.is_cpu and not g.is_sparse and not g.any():
            zero.add(id(p))
    return missing, zero


class Suspects:
    """Parameters of one optimizer without a gradient (or with zeros only: ``zero``) in its first
    steps, followed to the end of the run."""

    __slots__ = ("optimizer", "total", "names", "where", "got", "handles", "cut", "cut_at",
                 "traced", "exact", "number", "zero")

    def __init__(self, optimizer: str, total: int, names: dict[int, str], where: Any,
                 zero: set[int] | None = None) -> None:
        self.optimizer = optimizer
        self.total = total
        self.names = names  # id(param) -> "name (shape)"
        self.where = where
        self.zero = zero or set()  # ids that had a zero gradient at some of those steps
        self.got: set[int] = set()
        self.handles: list[Any] = []
        self.cut = ""  # where the path is cut, when found
        self.cut_at: Any = None  # ... and the user line of the first cut output named
        self.traced = False  # a module's next forward was traced for the op that cuts it
        self.exact = False  # ... and that trace named the op (``cut_at`` is that op's line)
        self.number: Any = None  # (op, line) where the loss was rebuilt from a Python number

    def follow(self, params: list[Any]) -> None:
        for p in params:
            key = id(p)
            if key in self.zero:
                def accumulated(q: Any, key: int = key, got: set = self.got) -> None:
                    g = q.grad
                    if g is not None and (not g.is_cpu or g.is_sparse or bool(g.any())):
                        got.add(key)
            else:
                def accumulated(_: Any, key: int = key, got: set = self.got) -> None:
                    got.add(key)

            self.handles.append(p.register_post_accumulate_grad_hook(accumulated))

    def never(self) -> list[int]:
        """The suspects that are still without a gradient: all of them when the cause was found
        (a cut output, or a Python number taken out of the graph), else only those whose
        gradient was None (a zero gradient alone proves no cut)."""
        keys = [key for key in self.names if key not in self.got]
        if self.cut or self.cut_at is not None or self.number and self.number[0] in NUMBER_OPS:
            return keys
        return [key for key in keys if key not in self.zero]

    def release(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []
