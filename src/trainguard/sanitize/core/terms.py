"""Loss terms cut from every parameter while the total is backpropagated.

A loss is usually a sum of terms (``recon + beta * kl``). When one term, or a part of one, is
computed from a model output that was cut from the graph (``mu.detach()``, ``.data``, a forward
under ``no_grad``), the total still has a ``grad_fn``, every parameter still gets a gradient from
the other terms, and nothing fails: the term simply does nothing. The loss's graph shows it as an
addition (``AddBackward0``/``SubBackward0``) with a missing input (``None`` in its
``next_functions``) near the root.

Two stages, both bounded:

1. :func:`open_terms`: the *additive top* of a backward root's graph (the nodes reached from the
   root through sums, differences, scalings, means, stacks and reshapes only; at most
   :data:`_TOP` nodes) holds an addition with a missing input. That alone proves nothing: a
   running total started at ``torch.zeros(())``, labels in ``(pred - y).mean()``, a constant.
2. :func:`term_trace`: the next cycle (from the end of that backward to the next backward) runs
   under a ``TorchFunctionMode`` that marks every tensor made by a cut from a tensor that requires
   grad (``detach``, ``.data``, an op under ``no_grad``, an op whose result is integer or boolean:
   ``argmax``, the indices of ``torch.max(x, 1)``, a comparison, ``.long()``, for which autograd
   defines no gradient) with the cut's op and user line, carries
   the mark through later ops, and notes each addition of a marked tensor to one that requires
   grad. At the next backward, an addition of the additive top whose missing input was such a
   marked tensor names the cut. A straight-through estimator (``x + (q - x).detach()``: the cut
   tensor is computed from the other operand) and targets of a TD or distillation loss (inside
   ``mse_loss``/``kl_div``, below the additive top) stay silent.

Reference: https://pytorch.org/docs/stable/notes/autograd.html (``detach``, grad modes);
GitHub yifita/deep_cage#16 (a detached loss term without effect), shuaizzZ/Recall-Loss-PyTorch#1
(a recall term computed from ``torch.max`` indices has no gradient).
"""

from __future__ import annotations

from typing import Any

from trainguard.sanitize.core.bounds import Budget
from trainguard.sanitize.core.frames import Location
from trainguard.sanitize.core.graph import graph_nodes
from trainguard.sanitize.core.tracing import (ArrayMarks, TraceSlot, bounded_mode, op_name,
                                             tensors)

__all__ = ["open_terms", "term_trace", "TermWatch"]

_TOP = 64  # nodes of a root's additive top looked at
_WAIT = 8  # backward calls a trace lasts at most
_OPS = 20_000  # ops followed at most in the traced cycle
_STE_NODES = 2_000  # nodes walked to tell a straight-through estimator from a cut term
_PASS = frozenset({"Add", "Sub", "Mul", "Div", "Neg", "Sum", "Mean", "Stack", "Cat", "Unsqueeze",
                   "Squeeze", "View", "UnsafeView", "ReshapeAlias", "Expand", "Clone", "ToCopy"})
_ADDS = frozenset({"add", "add_", "__add__", "__radd__", "__iadd__", "sub", "sub_", "__sub__",
                   "__rsub__", "__isub__", "subtract"})
_CUTS = frozenset({"detach", "detach_", "data", "tensor", "as_tensor"})
# a copy of graph tensors into a new one (``torch.tensor([log_p, ...])``): never meant as a term,
# unlike a detached baseline or target beside it in the same product, so it is named first
_COPIES = frozenset({"tensor", "as_tensor", "numpy"})  # (numpy: a round trip through NumPy)


def _kind(node: Any) -> str:
    """``"Add"`` for ``AddBackward0`` (and not for ``AddmmBackward0``: a linear layer)."""
    return type(node).__name__.split("Backward")[0]


def _additive(node: Any) -> bool:
    return _kind(node) in _PASS


def _top(roots: tuple) -> list[Any]:
    """The additive top of ``roots``' graphs (see the module doc), in walking order."""
    out: list[Any] = []
    seen: set[int] = set()
    frontier = [getattr(r, "grad_fn", None) for r in roots]
    while frontier and len(out) < _TOP:
        node = frontier.pop()
        if node is None or id(node) in seen or not _additive(node):
            continue
        seen.add(id(node))
        out.append(node)
        frontier.extend(n for n, _ in getattr(node, "next_functions", ()) if n is not None)
    return out


def _open(node: Any) -> bool:
    """An addition or difference with an input that carries no graph."""
    return _kind(node) in ("Add", "Sub") and any(
        n is None for n, _ in getattr(node, "next_functions", ()))


def open_terms(roots: tuple) -> list[Any]:
    """The additions of ``roots``' additive top that miss an input (see the module doc)."""
    return [n for n in _top(roots) if _open(n)]


def _float(t: Any) -> bool:
    return t.is_floating_point() or t.is_complex()


def _discrete(outs: list[Any]) -> bool:
    """Some of ``outs`` are integer or boolean: autograd defines no gradient for them
    (``argmax``, a comparison, ``.long()``), so they cut the graph like a ``detach``."""
    return any(not _float(t) for t in outs)


def _reaches(start: Any, other: Any) -> bool:
    """Whether ``other`` (a tensor that requires grad) is in ``start``'s graph (bounded)."""
    node = getattr(start, "grad_fn", None)
    target = other.grad_fn
    if node is None:
        return start is other
    for n in graph_nodes(node, budget=Budget(_STE_NODES)):
        if n is target or getattr(n, "variable", None) is other:
            return True
    return False


def term_trace() -> Any:
    """A ``TorchFunctionMode`` for one cycle (see the module doc); ``cut_terms(roots)`` answers
    ``[(op, location)]`` for the open additions of ``roots``' additive top made from a cut;
    ``clear()`` drops what it holds."""
    class TermTrace(bounded_mode()):
        limit = _OPS

        def __init__(self) -> None:
            super().__init__()
            self.marks: dict[int, tuple[str, Location | None, Any]] = {}  # id(t) -> cut
            self.keep: list[Any] = []  # marked tensors, alive so that their ids stay unique
            self.adds: dict[int, tuple[str, Location | None]] = {}  # id(grad_fn) -> cut
            self.nodes: list[Any] = []
            self.arrays = ArrayMarks()  # marked arrays, for the tensors torch.from_numpy makes

        def _follow(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
            import torch

            inputs = [t for a in (*args, *kwargs.values()) for t in tensors(a, dicts=False)]
            if not inputs:
                return
            outs = tensors(out, dicts=False)
            name = op_name(func)
            marked = [self.marks[id(t)] if id(t) in self.marks else self.arrays.of(t)
                      for t in inputs]
            marked = [m for m in marked if m is not None]
            carried = next((m for m in marked if m[0] in _COPIES), marked[0] if marked else None)
            if not outs and marked and type(out).__module__ == "numpy":  # x.detach().numpy()
                self.arrays.add(out, ("numpy", marked[0][1], marked[0][2]))
                return
            source = next((t for t in inputs if t.requires_grad), None)
            if outs and not any(t.requires_grad for t in outs):
                if source is not None and (name in _CUTS or not torch.is_grad_enabled()
                                           or _discrete(outs)):
                    carried = (name if torch.is_grad_enabled() else "no_grad", self.caller(),
                               source)
                if carried is not None:
                    for t in outs:
                        self.marks[id(t)] = carried
                        self.keep.append(t)
                return
            if source is not None and _discrete(outs):  # torch.max(x, 1): its indices
                for t in outs:
                    if not t.requires_grad and not _float(t):
                        self.marks[id(t)] = (name, self.caller(), source)
                        self.keep.append(t)
            if name in _ADDS and outs and outs[0].grad_fn is not None:
                self._added(inputs, outs[0])

        def _added(self, inputs: list[Any], result: Any) -> None:
            cut = next((self.marks[id(t)] for t in inputs
                        if id(t) in self.marks and not t.requires_grad), None)
            if cut is None:
                return
            other = next((t for t in inputs if t.requires_grad), None)
            if other is not None and _reaches(cut[2], other):
                return  # x + (f(x) - x).detach(): a straight-through estimator
            self.adds[id(result.grad_fn)] = (cut[0], cut[1])
            self.nodes.append(result.grad_fn)

        def cut_terms(self, roots: tuple) -> list[tuple[str, Location | None]]:
            return [self.adds[id(n)] for n in open_terms(roots) if id(n) in self.adds]

        def clear(self) -> None:
            self.marks.clear()
            self.keep.clear()
            self.adds.clear()
            self.nodes.clear()
            self.arrays.clear()

    return TermTrace()


class TermWatch(TraceSlot):
    """The two stages for one run: :meth:`backward` looks at the first :data:`LOOKS` backward
    calls' additive tops and, during a traced cycle, answers the cut terms found; the trace
    starts at :meth:`backward_done` after a backward with an open addition and ends at the next
    backward from the same line (or after :data:`_WAIT` backward calls), once per run."""

    LOOKS = 3

    def __init__(self) -> None:
        self.looks = 0
        self.line: Any = None  # the line of the backward whose loss had an open addition
        self.waited = 0
        self.done = False

    @property
    def pending(self) -> bool:
        """Whether the watch still needs events (backward calls, or one to take a closed trace
        off the mode stack)."""
        return not self.done or self.leftover is not None

    def backward(self, call: Any) -> list[tuple[str, Location | None]]:
        self.settle()
        if self.done:
            return []
        if self.trace is not None:
            found = self.trace.cut_terms(call.tensors)
            self.waited += 1
            if found or call.where == self.line or self.waited >= _WAIT:
                self.close()
            return found
        if self.line is None:
            self.looks += 1
            if open_terms(call.tensors):
                self.line = call.where
            elif self.looks >= self.LOOKS:
                self.done = True
        return []

    def backward_done(self, call: Any) -> None:
        self.settle()
        if self.done or self.trace is not None or self.line is None or call.where != self.line:
            return
        self.trace = term_trace()
        self.trace.__enter__()

    def close(self) -> None:
        """End the trace, and the watch for good (see :meth:`TraceSlot.close`)."""
        self.done = True
        super().close()
