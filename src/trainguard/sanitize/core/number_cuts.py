"""Where a loss was rebuilt from a Python number taken out of the graph.

Used by TG205 once it has proof that some parameters never receive a gradient: the path from the
loss to them may be cut where the user took a Python number (``.item()``, ``float()``,
``.tolist()``, ``.numpy()``) from a tensor computed from those parameters and built the loss
from it again (``-log_prob.item() * reward``, ``torch.tensor(x.item())``, returns as floats,
``torch.from_numpy(log_prob.detach().numpy())``, read by the array's memory), or
copied the tensors themselves into a new leaf (``torch.tensor([loss_a, loss_b],
requires_grad=True)``).
Autograd keeps no trace of that: the loss is a new leaf or a graph of constants.

:func:`number_trace` is a ``TorchFunctionMode`` over one cycle (up to the next ``backward``) that
follows the tensors computed from the suspect parameters, like
:func:`~trainguard.sanitize.core.cuts.cut_trace`, and also the values that leave them: each
number returned by a cut is remembered with the cut's op and user line (a NumPy array by
identity), and a later op given that number (or its negation) as an argument marks its outputs
with that cut, which later ops carry along. At the backward, the cut the loss itself carries is
the line that cut the path. Integral numbers (``0.0``, ``3``) are not matched: too many constants
look the same. A tensor with no graph and no mark that ``requires_grad`` is switched on for
(``loss.requires_grad = True``, ``requires_grad_()``: the mode sees the setter) is marked with
that line: a loss made a new leaf by hand hides a cut made before it (ronghuaiyang/arcface-
pytorch#56), also one whose values went through NumPy copies that no mark follows.

Cost: a Python call per torch op during the traced cycles (at most :data:`_WAIT` backward calls,
:data:`_OPS` ops), only after a TG205 finding is already certain; nothing otherwise. Values are
never changed: each op runs as given.

Reference: ``Tensor.item`` ("This operation is not differentiable",
https://pytorch.org/docs/stable/generated/torch.Tensor.item.html); GitHub isayev/ReLeaSE#39.
"""

from __future__ import annotations

import sys
from typing import Any
from weakref import ref

from trainguard.sanitize.core.callstack import grad_off_site
from trainguard.sanitize.core.frames import Location, short_location, user_frame
from trainguard.sanitize.core.tracing import (ArrayMarks, TraceSlot, bounded_mode, op_name,
                                             tensors)

__all__ = ["number_trace", "NumberWatch", "NUMBER_OPS", "LEAF_BY_HAND", "number_clause"]

_WAIT = 8  # backward calls a trace lasts at most
_OPS = 20_000  # ops followed at most
_VALUES = 256  # numbers remembered at most
NUMBER_OPS = frozenset({"item", "tolist", "__float__", "numpy", "__array__"})
LEAF_BY_HAND = "requires_grad = True"  # the cut named for a loss made a leaf by hand
# ops whose result takes only the shape, dtype or device of their input, not its values: no path
# was cut by them (a ``torch.zeros_like(x)`` buffer filled in place later)
_SHAPE_ONLY = frozenset({"zeros_like", "ones_like", "empty_like", "full_like", "rand_like",
                         "randn_like", "randint_like", "new_zeros", "new_ones", "new_empty",
                         "new_full", "new_tensor"})

Cut = tuple[str, "Location | None"]


class _Shaped(tuple):
    """A cut carried by shape alone (``ArrayMarks.of(..., alike=True)``: a NumPy op made a new
    array between): a loss made a leaf by hand after it is the line named instead."""


def _numbers(value: Any, depth: int = 2) -> list[float]:
    """The non-integral floats in ``value`` (a number, or lists of them, ``depth`` levels)."""
    if isinstance(value, float):
        return [] if value != value or value.is_integer() else [value]
    if depth and isinstance(value, (list, tuple)):
        return [n for v in value[:64] for n in _numbers(v, depth - 1)]
    return []


class _Marks:
    """What a trace has seen (torch-free bookkeeping): the tensors computed from the suspect
    parameters, the cut each marked tensor or array carries, and the numbers cuts returned.

    Weak references, checked at each look-up (an id is reused once its object dies); holding the
    tensors would keep their graphs alive."""

    def __init__(self, params: list[Any]) -> None:
        self.derived = {id(p): ref(p) for p in params}  # computed from them, with grad
        self.marks: dict[int, tuple[Any, Cut]] = {}  # id(tensor or array) -> its cut
        self.values: dict[float, Cut] = {}  # a number taken from the graph -> its cut
        self.arrays = ArrayMarks()  # marked arrays, for the tensors torch.from_numpy makes
        self.leaves: dict[int, tuple[Any, Cut]] = {}  # made leaves by hand: id -> their line

    def _derived(self, t: Any) -> bool:
        r = self.derived.get(id(t))
        return r is not None and r() is t

    def _mark(self, value: Any) -> Cut | None:
        found = self.marks.get(id(value))
        return found[1] if found is not None and found[0]() is value else None

    def _value(self, given: tuple) -> Cut | None:
        """The cut that returned a number (or its negation) among an op's arguments."""
        return next((self.values.get(n, self.values.get(-n)) for a in given
                     for n in _numbers(a) if n in self.values or -n in self.values), None)

    def _remember(self, out: Any, cut: Cut) -> None:
        if type(out).__module__ == "numpy":
            try:
                self.marks[id(out)] = (ref(out), cut)
            except TypeError:  # (an object without weak references)
                pass
            self.arrays.add(out, cut)
            return
        for n in _numbers(out):
            if len(self.values) < _VALUES:
                self.values.setdefault(n, cut)

    def loss_cut(self, roots: tuple) -> Cut | None:
        found = next((c for r in roots if (c := self._mark(r)) is not None), None)
        leaf = next((c[1] for r in roots if (c := self.leaves.get(id(r))) and c[0]() is r), None)
        return leaf if leaf is not None and isinstance(found, _Shaped) else found or leaf

    def clear(self) -> None:
        self.derived.clear()
        self.marks.clear()
        self.leaves.clear()
        self.values.clear()
        self.arrays.clear()


def number_trace(params: list[Any]) -> Any:
    """The mode (see the module doc); ``loss_cut(roots)`` answers the cut a backward root was
    computed from, or None."""
    import torch

    class NumberTrace(bounded_mode(), _Marks):
        limit = _OPS

        def __init__(self) -> None:
            super().__init__()
            _Marks.__init__(self, params)
            self.no_grad_sites: dict[tuple, Location | None] = {}

        def no_grad_caller(self) -> tuple[str, Location | None]:
            """Where grad was turned off for the op (only from ``_follow``):
            :func:`..callstack.grad_off_site`. Cached per op site."""
            start = user_frame(sys._getframe(3))
            key = (id(start.f_code), start.f_lasti) if start is not None else None
            if key not in self.no_grad_sites:
                if len(self.no_grad_sites) > 256:
                    self.no_grad_sites.clear()
                self.no_grad_sites[key] = grad_off_site(sys._getframe(3))
            return self.no_grad_sites[key]

        def _follow(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
            if _switches_on(func, args, kwargs):
                # a tensor with no graph made a leaf that requires grad by hand (``loss.
                # requires_grad = True``): when that tensor itself is the loss, it hides the
                # cut here (not carried on: ``x.requires_grad_()`` of an input batch is no cut)
                t = args[0]
                if t.grad_fn is None and not self._derived(t) and \
                        isinstance(self._mark(t), (_Shaped, type(None))):
                    self.leaves[id(t)] = (ref(t), (LEAF_BY_HAND, self.caller()))
                return
            given = (*args, *kwargs.values())
            inputs = [t for a in given for t in tensors(a)]
            # (of several marked inputs, an explicit cut before a no_grad one: PPO's old
            # log-probabilities, computed under no_grad on purpose, beside a detached new one)
            carried = min((c for t in inputs if (c := self._mark(t)) is not None),
                          key=lambda c: c[0] == "no_grad", default=None)
            if carried is None and self.marks:
                carried = next((c for a in given if (c := self._mark(a)) is not None), None)
            if carried is None and self.values:
                carried = self._value(given)
            if carried is None and self.arrays.marks:
                carried = next((c for t in inputs if (c := self.arrays.of(t)) is not None),
                               None) or next((_Shaped(c) for t in inputs if (
                                   c := self.arrays.of(t, alike=True)) is not None), None)
            outs = tensors(out)
            from_params = any(self._derived(t) for t in inputs)
            # (a new leaf made to require grad from them, ``torch.tensor([...],
            # requires_grad=True)``, carries no graph either)
            # (an op returning None, an optimizer's ``_foreach_add_`` on them, cuts nothing)
            if from_params and out is not None and op_name(func) not in _SHAPE_ONLY and not any(
                    t.requires_grad and (t.grad_fn is not None or any(t is i for i in inputs))
                    for t in outs):
                if torch.is_grad_enabled():
                    name, where = op_name(func), self.caller()
                else:
                    name, where = self.no_grad_caller()
                cut = (name, where)
                carried = carried or cut
                if name in NUMBER_OPS:
                    self._remember(out, cut)
            elif carried is not None and not outs and out is not None:
                self._remember(out, carried)  # a number of a tensor made from a cut number
            for t in outs:
                # (a parameter updated in place by its optimizer, from its ``.grad``, stays a
                # parameter: the update cuts nothing)
                kept = t.grad_fn is None and self._derived(t)
                if from_params and t.requires_grad:
                    self.derived[id(t)] = ref(t)
                if carried is not None and not kept:
                    self.marks[id(t)] = (ref(t), carried)

    return NumberTrace()


def _switches_on(func: Any, args: tuple, kwargs: dict) -> bool:
    """Whether the op is ``t.requires_grad = True`` or ``t.requires_grad_()`` (``True``)."""
    name = getattr(func, "__name__", "")
    if name == "__set__":
        if getattr(getattr(func, "__self__", None), "__name__", "") != "requires_grad":
            return False
        on = args[1] if len(args) > 1 else None
    elif name == "requires_grad_":
        on = args[1] if len(args) > 1 else kwargs.get("requires_grad", True)
    else:
        return False
    return on is True and bool(args) and hasattr(args[0], "grad_fn")


def number_clause(number: Cut | None) -> str:
    """The finding's clause for the cut a loss carries (:meth:`NumberWatch.backward`), or ""."""
    if number is None:
        return ""
    if number[0] == LEAF_BY_HAND:
        return (f"; the loss is a tensor with no graph that `requires_grad` was switched on for "
                f"at {short_location(number[1])}: a new leaf, which silences \"element 0 of "
                "tensors does not require grad\" but gives its gradient to nothing; the path "
                "to the parameters is cut before it (a NumPy round trip, .detach(), .item())")
    return (f"; the loss is computed from what `{number[0]}` at {short_location(number[1])} "
            "took out of the graph: autograd cannot follow it back from there")


class NumberWatch(TraceSlot):
    """One :func:`number_trace` for a run: :meth:`start` enters it, :meth:`backward` answers the
    cut of a backward's roots (closing the trace when found or after :data:`_WAIT` calls),
    :meth:`settle` takes a closed trace off torch's mode stack (see ``core/tracing.py``)."""

    def __init__(self) -> None:
        self.waited = 0
        self.started = False

    @property
    def pending(self) -> bool:
        return self.trace is not None or self.leftover is not None

    def start(self, params: list[Any]) -> None:
        if self.started or not params:
            return
        self.started = True
        self.trace = number_trace(params)
        self.trace.__enter__()

    def backward(self, roots: tuple) -> Cut | None:
        self.settle()
        if self.trace is None:
            return None
        found = self.trace.loss_cut(roots)
        self.waited += 1
        if found is not None or self.waited >= _WAIT:
            self.close()
        return found
