"""Stamps on outermost module outputs: when and where each graph was made.

A check that needs to know where the parts of an autograd graph came from declares
``stamps = "outputs"`` (or ``"inputs"``, which also keeps weak references to each call's tensor
arguments, so that the call can be run again); the module-call probe then puts a
:class:`~trainguard.sanitize.core.records.Made` in the ``grad_fn.metadata`` of every outermost
output made with grad mode on (settled steps too), under the key
:data:`~trainguard.sanitize.core.records.MADE`. The stamp lives exactly as long as the graph node.
The latest stamps are kept, weakly, in :attr:`State.stamps`, and with ``"inputs"`` the latest call
whose output is a tuple, list or dict in :attr:`State.last_multi`.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Callable

from trainguard.sanitize.core.records import MADE, Made, first_tensor

if TYPE_CHECKING:
    from trainguard.sanitize.core.bus import Bus

__all__ = ["stamper", "keep"]

Stamp = Callable[[Any, Any, Any, tuple, dict], "Made | None"]
_MOST, _KEPT = 2048, 1024  # stamps followed at most; kept when that is passed


def wanted(bus: "Bus") -> str:
    """``""``, ``"outputs"`` or ``"inputs"``: the most any running check declared."""
    kinds = {getattr(check, "stamps", "") for check in bus.checks}
    return "inputs" if "inputs" in kinds else "outputs" if "outputs" in kinds else ""


def stamper(bus: "Bus") -> Stamp | None:
    """``stamp(module, output, where, args, kwargs)``, which stamps the ``grad_fn`` of an outermost
    output and returns the stamp (None when nothing was stamped); None when no check wants
    stamps."""
    import torch

    kind = wanted(bus)
    if not kind:
        return None
    state = bus.state
    stamps = state.stamps
    tensor_type = torch.Tensor
    ref = weakref.ref
    call_refs = _call_refs(tensor_type) if kind == "inputs" else None

    def stamp(module: Any, output: Any, where: Any, args: tuple, kwargs: dict) -> Made | None:
        made = None
        if isinstance(output, tensor_type):  # (most models: one tensor, no list to build)
            node = output.grad_fn
            if node is None:
                return None
            inputs = named = None
            if call_refs is not None:
                if not kwargs and len(args) == 1 and isinstance(args[0], tensor_type):
                    inputs = [ref(args[0])]  # (the usual call: no call, no loop)
                else:
                    inputs, named = call_refs(args, kwargs)
            made = Made(state.backward_count, state.step, where, type(module).__name__,
                        state.root_forwards, id(module), inputs,
                        ref(output) if inputs is not None else None, named,
                        grads=state.grad_count)
            node.metadata[MADE] = made
        else:
            made = _stamp_each(state, module, output, where, args, kwargs, call_refs)
        if made is not None and not state.in_backward:  # (keep(), inlined: every forward)
            stamps.append(ref(made))
            if len(stamps) > _MOST:
                del stamps[:-_KEPT]
        return made
    return stamp


def keep(stamps: list[Any], made: Made) -> None:
    """Follow ``made`` weakly in ``State.stamps``; past :data:`_MOST` (no check reads them:
    TG201 switched off), only the newest :data:`_KEPT` are kept."""
    stamps.append(weakref.ref(made))
    if len(stamps) > _MOST:
        del stamps[:-_KEPT]


def _stamp_each(state: Any, module: Any, output: Any, where: Any, args: tuple, kwargs: dict,
                call_refs: Any) -> Made | None:
    """Stamp the first few tensors of a tuple, list or dict output with one stamp."""
    made = None
    for tensor in first_tensor(output):
        node = tensor.grad_fn
        if node is not None:
            if made is None:
                inputs, named = call_refs(args, kwargs) if call_refs is not None else (None, None)
                made = Made(state.backward_count, state.step, where, type(module).__name__,
                            state.root_forwards, id(module), inputs, None, named,
                            grads=state.grad_count)
            node.metadata[MADE] = made
    if made is not None and made.inputs is not None:
        # only the first few tensors of a tuple or dict are stamped: what TG405 needs to re-run
        # this call when a loss comes from another one (no reference to the stamp, which must
        # die with the graph)
        state.last_multi = (made.order, made.model_id, made.module, made.where, made.inputs,
                            made.kwargs)
    return made


def _call_refs(tensor_type: type) -> Callable[[tuple, dict], tuple]:
    """``call_refs(args, kwargs) -> (Made.inputs, Made.kwargs)`` of a call, or ``(None, None)``
    when it has an argument that would have to be kept alive."""
    ref = weakref.ref

    def input_refs(args: tuple) -> list[Any] | None:
        refs = []  # (a plain loop: this runs on every step, settled ones too)
        for a in args:
            if not isinstance(a, tensor_type):
                return None
            refs.append(ref(a))
        return refs

    def keyword_refs(kwargs: dict) -> dict[str, Any] | None:
        """Tensors as weak references, None, bools, numbers and strings as they are; None when
        another value would have to be kept alive."""
        out: dict[str, Any] = {}
        for key, value in kwargs.items():
            if isinstance(value, tensor_type):
                out[key] = ref(value)
            elif value is None or isinstance(value, (bool, int, float, str)):
                out[key] = value
            else:
                return None
        return out

    def call_refs(args: tuple, kwargs: dict) -> tuple[list[Any] | None, dict[str, Any] | None]:
        inputs = input_refs(args)
        if inputs is None or not kwargs:
            return inputs, None
        named = keyword_refs(kwargs)
        return (inputs, named) if named is not None else (None, None)
    return call_refs
