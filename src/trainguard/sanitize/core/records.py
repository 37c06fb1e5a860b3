"""The records that events carry: :class:`ForwardCall`, :class:`LossCall`, :class:`BackwardCall`,
:class:`ModeCall`, and :class:`Made`, the stamp on an outermost output's ``grad_fn``
(``probes/stamps.py``)."""

from __future__ import annotations

from dataclasses import is_dataclass
from types import SimpleNamespace
from typing import Any

from trainguard.sanitize.core.frames import Location, user_location

MADE = "trainguard.made"
"""Metadata key on the ``grad_fn`` of outermost module outputs (when a check declares ``stamps``); the
value is a :class:`Made`."""


class Made:
    """When and where an outermost output (or a backward root) was made.

    Stored in the output's ``grad_fn.metadata`` (which lives exactly as long as the node), so a
    weak reference to it tells whether the graph is still alive, and a walk over a graph finds
    where its parts came from.

    Attributes:
        backward_count: backward calls completed when it was made.
        step: optimizer steps completed.
        where: the user's ``(path, line, col)``.
        module: the module's class name (``"backward root"`` for a loss).
        order: outermost module calls completed (a clock for runs without optimizer steps).
        grads: ``torch.autograd.grad`` calls completed outside a module's forward (a clock for
            runs that take gradients without backward or a step: forces from an energy).
        model_id: ``id()`` of the module whose call made it (None for a loss).
        inputs: weak references to the call's positional arguments, all tensors (when
            ``stamps = "inputs"``; else, or when an argument is not a tensor, None).
        output: a weak reference to the output tensor the stamp is on (when ``inputs`` is set
            and the output is one tensor; else None).
        kwargs: with ``inputs``, the call's keyword arguments (tensors as weak references), or
            None when it had none.
    """

    __slots__ = ("backward_count", "step", "where", "module", "order", "model_id", "inputs",
                 "output", "kwargs", "grads", "__weakref__")

    def __init__(self, backward_count: int, step: int, where: Any, module: str,
                 order: int, model_id: int | None = None, inputs: list[Any] | None = None,
                 output: Any = None, kwargs: dict[str, Any] | None = None, *,
                 grads: int = 0) -> None:
        self.backward_count = backward_count
        self.step = step
        self.where = where
        self.module = module
        self.order = order
        self.model_id = model_id
        self.inputs = inputs
        self.output = output
        self.kwargs = kwargs
        self.grads = grads

__all__ = ["MADE", "Made", "ForwardCall", "LossCall", "BackwardCall", "ModeCall", "first_tensor",
           "graph_tensors"]


_NO_KWARGS: dict = {}


class ForwardCall:
    """One module call. ``output`` is set when it returns; ``failed`` when it raised.

    ``where`` (the user's line) and ``direct`` are set for outermost calls only.
    """

    __slots__ = ("module", "args", "kwargs", "output", "depth", "training", "grad_enabled",
                 "where", "direct", "reenabled", "failed", "made", "__weakref__")

    def __init__(self, module: Any, args: tuple, depth: int, training: bool,
                 grad_enabled: bool, where: Location | None) -> None:
        self.module = module
        self.args = args
        self.kwargs: dict = _NO_KWARGS  # keyword arguments (outermost calls checked in full)
        self.output: Any = None
        self.depth = depth
        self.training = training
        self.grad_enabled = grad_enabled
        self.where = where
        self.direct = False  # an outermost call made by user code itself (not by a library)
        self.reenabled = False  # grad on inside an open torch.no_grad() block (outermost calls)
        self.failed = False
        self.made: Made | None = None  # the stamp put on its outputs, when stamping is on


class LossCall:
    """A loss computed by a loss module or a watched functional loss.

    Attributes:
        name: ``"CrossEntropyLoss"`` (module) or ``"cross_entropy"`` (functional).
        input, target: the first two arguments as passed.
        output: the loss (None when it raised).
        module: the loss module, or None for a functional loss.
        where: the user's line computing it.
    """

    __slots__ = ("name", "input", "target", "output", "module", "_where", "_frame", "args", "kwargs")

    def __init__(self, name: str, args: tuple, kwargs: dict, output: Any, module: Any,
                 where: Location | None, frame: Any = None) -> None:
        self.name = name
        self.args = args
        self.kwargs = kwargs
        self.input = args[0] if args else kwargs.get("input")
        self.target = args[1] if len(args) > 1 else kwargs.get("target")
        self.output = output
        self.module = module
        self._where = where
        self._frame = frame  # only during the event: ``where`` is found from it on first use

    @property
    def where(self) -> Location | None:
        if self._where is None and self._frame is not None:
            self._where = user_location(self._frame)
            self._frame = None
        return self._where


class BackwardCall:
    """A ``backward``: ``tensors`` are the roots, ``retain_graph`` as PyTorch resolves it.

    ``index`` is the number of backward calls completed before this one, ``step`` the optimizer
    steps completed; ``failed`` is set when it raised. ``tensors`` is emptied after the events, so
    the record keeps no graph alive; ``facts`` holds what checks noted about the roots.
    """

    __slots__ = ("tensors", "retain_graph", "create_graph", "where", "index", "step", "failed",
                 "facts")

    def __init__(self, tensors: tuple, retain_graph: bool, create_graph: bool,
                 where: Location | None, index: int, step: int) -> None:
        self.tensors = tensors
        self.retain_graph = retain_graph
        self.create_graph = create_graph
        self.where = where
        self.index = index
        self.step = step
        self.failed = False
        self.facts: dict[str, Any] = {}


class ModeCall:
    """An outermost ``Module.train(mode)`` call (``eval()`` is ``train(False)``), before it runs.

    Attributes:
        module: the module whose mode is set (its children follow).
        mode: the mode asked for (True: training).
        was_training: ``module.training`` before the call.
        direct: the call was made by user code (past ``train``/``eval`` overrides that call
            ``super()``'s, such as ``transformers.PreTrainedModel.train``), not by a library's
            loop (Lightning's or a ``Trainer``'s evaluation loop).
        after_library_eval: the last ``eval()`` was a library's call on this same module (an
            evaluation loop's), and this call asks for training mode.
        where: the user's line (found on first use; None outside user code).
    """

    __slots__ = ("module", "mode", "was_training", "direct", "after_library_eval", "_where",
                 "_frame")

    def __init__(self, module: Any, mode: bool, was_training: bool, direct: bool,
                 frame: Any) -> None:
        self.module = module
        self.mode = mode
        self.was_training = was_training
        self.direct = direct
        self.after_library_eval = False
        self._where: Location | None = None
        self._frame = frame  # only during the event: ``where`` is found from it on first use

    @property
    def where(self) -> Location | None:
        if self._where is None and self._frame is not None:
            self._where = user_location(self._frame)
            self._frame = None
        return self._where


def first_tensor(value: Any, *, limit: int = 4) -> list[Any]:
    """Up to ``limit`` tensors found in a module output (a tensor, tuple, list or dict, or the
    parameter tensors of a ``torch.distributions.Distribution``: a policy network that returns
    ``Categorical(logits=...)``)."""
    import torch

    out: list[Any] = []
    stack = [value]
    while stack and len(out) < limit:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            out.append(item)
        elif isinstance(item, (tuple, list)):
            stack.extend(reversed(item))
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, torch.distributions.Distribution):
            stack.extend(v for v in vars(item).values() if isinstance(v, torch.Tensor))
        elif isinstance(item, SimpleNamespace) or (is_dataclass(item) and hasattr(item, "__dict__")
                                                   and not isinstance(item, type)):
            # a record of outputs: ``SimpleNamespace(loss=..., logits=...)``, a dataclass
            stack.extend(reversed(list(vars(item).values())))
    return out


def graph_tensors(args: tuple, kwargs: dict) -> list[Any]:
    """The tensors with a ``grad_fn`` among a call's arguments, keyword arguments included, and
    one level into the tuples, lists and dicts among them (``head((a, b))``)."""
    out = []
    for a in (*args, *kwargs.values()):
        items = a.values() if isinstance(a, dict) else a if isinstance(a, (list, tuple)) else (a,)
        out.extend(t for t in items if getattr(t, "grad_fn", None) is not None)
    return out
