"""The backward probe: ``torch.autograd.backward`` (which ``Tensor.backward`` calls), wrapped.

Events: ``on_backward`` before the backward runs, ``on_backward_done`` after it returned,
``on_backward_failed`` when it raised. ``torch.autograd.grad`` is wrapped too: a call that raises is
a failed backward (the same errors: no graph, freed buffers, an in-place change), and the gradients
it returns with ``create_graph=True`` are stamped (``probes/stamps.py``): they carry a graph of
their own (a double backward through the model) that reaches no module output, so a gradient penalty
kept across steps is followed like a kept loss (TG201). Facts kept (``State``): ``backward_count``,
``in_backward`` (forwards during a backward are recomputation), ``backwards`` (the latest calls,
with no reference to the graph). A backward's end may bound the cadence's cycles in a loop without
an optimizer step. ``torch.export`` never traces a backward, so Dynamo's own test is enough here.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any, Callable

from trainguard.sanitize.core import frames
from trainguard.sanitize.core.bounds import Overrun
from trainguard.sanitize.core.cadence import BACKWARD
from trainguard.sanitize.core.graph import KEPT, ROOT, graph_nodes, node_metadata
from trainguard.sanitize.core.records import BackwardCall, Made
from trainguard.sanitize.probes.patch import Undo, patch
from trainguard.sanitize.probes.stamps import keep, wanted

if TYPE_CHECKING:
    from trainguard.sanitize.core.bus import Bus

__all__ = ["attach"]

_NO_INPUTS = object()  # the wrapper got other arguments: ``inputs`` is in its kwargs


def attach(bus: "Bus") -> list[Undo]:
    """Wrap ``torch.autograd.backward``; returns the undo action."""
    import torch

    undo: list[Undo] = []
    begin = _begin(bus)
    failed = _failed(bus)
    done = _done(bus)
    is_dynamo_compiling = torch.compiler.is_dynamo_compiling
    state = bus.state

    def make_backward(original: Any) -> Any:
        def backward(tensors: Any, grad_tensors: Any = None, retain_graph: Any = None,
                     create_graph: bool = False, *args: Any, inputs: Any = None,
                     **kwargs: Any) -> Any:
            # (``inputs`` by name: ``Tensor.backward`` passes it so, and a call without a
            # keyword dict to build is the cheaper one)
            if args or kwargs:
                if inputs is not None:
                    kwargs["inputs"] = inputs
                inputs = _NO_INPUTS
            if is_dynamo_compiling():
                return _run(original, tensors, grad_tensors, retain_graph, create_graph, inputs,
                            args, kwargs)
            try:
                call, checked, bounds = begin(tensors, retain_graph, create_graph)
            except Exception as exc:
                bus.hook_failed("torch.autograd.backward", exc)
                return _run(original, tensors, grad_tensors, retain_graph, create_graph, inputs,
                            args, kwargs)
            state.in_backward += 1
            try:
                if inputs is _NO_INPUTS:
                    result = original(tensors, grad_tensors, retain_graph, create_graph, *args,
                                      **kwargs)
                else:  # (the call of Tensor.backward: run here, without a helper's frame)
                    result = original(tensors, grad_tensors, retain_graph, create_graph,
                                      inputs=inputs)
            except BaseException as exc:
                failed(call, exc)
                raise
            finally:
                state.in_backward -= 1
            done(call, checked, bounds)
            return result
        return backward

    patch(torch.autograd, "backward", make_backward, undo)
    patch(torch.autograd, "grad", lambda original: _grad(bus, original, failed), undo)
    return undo


def _grad(bus: "Bus", original: Any, failed: Callable) -> Any:
    """``torch.autograd.grad`` whose results made with ``create_graph=True`` are stamped under
    :data:`ROOT` (like a backward root: no module made them) and followed in ``State.stamps``
    (when a check wants stamps); a call that raises is a failed backward
    (``on_backward_failed``, ``facts["api"]`` naming it)."""
    import torch

    state = bus.state
    stamps = bool(wanted(bus))

    def grad(*args: Any, **kwargs: Any) -> Any:
        # (grad(outputs, inputs, grad_outputs, retain_graph, create_graph, ...))
        create = bool(kwargs.get("create_graph", args[4] if len(args) > 4 else False))
        try:
            result = original(*args, **kwargs)
        except BaseException as exc:
            if not torch.compiler.is_dynamo_compiling():
                _grad_failed(state, failed, args, kwargs, create, exc)
            raise
        if state.modules:
            state.grads_in_forward.add(type(state.modules[0]))
        else:
            state.grad_count += 1  # (a clock for runs without backward: TG201)
            if state.no_grad_depth and not create:
                # TG104: the re-enabled region takes gradients itself (an attack's input
                # gradient), not inside a model's forward and not to train through them
                where = state.reenabled_at()
                if where is not None and state.grads_need_reenabling():
                    state.grads_taken_at.add(where)
        if stamps and create:
            try:
                _stamp_grads(state, result)
            except Exception as exc:
                bus.hook_failed("torch.autograd.grad", exc)
        if state.no_grad_depth and torch.is_grad_enabled():  # (grad re-enabled: TG104)
            try:
                _mark_kept(args, kwargs, result, create)
            except Exception as exc:
                bus.hook_failed("torch.autograd.grad", exc)
        return result
    return grad


def _mark_kept(args: tuple, kwargs: dict, result: Any, create: bool) -> None:
    """A gradient taken in a region that turned grad back on inside a ``no_grad`` block, with
    ``create_graph=True`` or ``retain_graph=True``: the graph it ran through keeps its saved
    tensors (an energy's graph kept for the forces' double backward) and, with ``create_graph``,
    the gradients carry a graph of their own. Marks those graphs' nodes near the roots, and the
    gradients' ``grad_fn``, with the call's line (:data:`KEPT`)."""
    import torch

    retain = kwargs.get("retain_graph", args[3] if len(args) > 3 else None)
    if not (create if retain is None else retain):
        return
    outputs = args[0] if args else kwargs.get("outputs")
    roots = [outputs] if isinstance(outputs, torch.Tensor) else list(outputs or ())
    made = (list(result) if isinstance(result, (tuple, list)) else [result]) if create else []
    where = frames.user_location(sys._getframe(2))
    for i, root in enumerate(roots + made):
        node, grad = getattr(root, "grad_fn", None), i >= len(roots)
        for current in graph_nodes(node, limit=1 if grad else 32) if node is not None else ():
            meta = node_metadata(current)
            if meta is not None:
                meta.setdefault(KEPT, (where, grad))


def _grad_failed(state: Any, failed: Callable, args: tuple, kwargs: dict, create: bool,
                 exc: BaseException) -> None:
    """A failed ``torch.autograd.grad``: its outputs as the roots of a failed backward. Never
    raises."""
    import torch

    try:
        outputs = args[0] if args else kwargs.get("outputs")
        roots = (outputs,) if isinstance(outputs, torch.Tensor) else tuple(
            t for t in outputs or () if isinstance(t, torch.Tensor))
        retain = kwargs.get("retain_graph", args[3] if len(args) > 3 else None)
        where = frames.user_location(sys._getframe(2))
        call = BackwardCall(roots, create if retain is None else bool(retain), create, where,
                            state.backward_count, state.step)
        call.facts["api"] = "torch.autograd.grad"
    except Exception:
        return
    failed(call, exc)


def _stamp_grads(state: Any, result: Any) -> None:
    """One :class:`Made` on the ``grad_fn`` of each returned gradient that has one."""
    made = None
    for tensor in result if isinstance(result, (tuple, list)) else (result,):
        node = getattr(tensor, "grad_fn", None)
        if node is None:
            continue
        if made is None:
            where = frames.user_location(sys._getframe(2))
            made = Made(state.backward_count, state.step, where,
                        "torch.autograd.grad(create_graph=True)", state.root_forwards)
            keep(state.stamps, made)
        node.metadata[ROOT] = made


def _run(original: Any, tensors: Any, grad_tensors: Any, retain_graph: Any, create_graph: Any,
         inputs: Any, args: tuple, kwargs: dict) -> Any:
    """``original`` with the wrapper's arguments (``inputs`` by name, or, when the wrapper got
    other arguments, ``_NO_INPUTS`` and everything in ``args``/``kwargs``)."""
    if inputs is _NO_INPUTS:
        return original(tensors, grad_tensors, retain_graph, create_graph, *args, **kwargs)
    return original(tensors, grad_tensors, retain_graph, create_graph, inputs=inputs)


def _begin(bus: "Bus") -> Callable:
    """``begin(tensors, retain_graph, create_graph) -> (call, checked, bounds)``: the record, whether
    the checks see this call, whether its end bounds the cadence's cycles; sends
    ``on_backward``."""
    import torch

    user_codes = frames._is_user_code  # id(code) -> bool, read directly on the settled path
    locations = frames._locations  # (id(code), f_lasti) -> location, likewise
    tensor_backward = torch.Tensor.backward.__code__
    state = bus.state
    cadence = bus.cadence
    see = cadence.see
    h = bus.handlers
    always = bus.always

    def begin(tensors: Any, retain_graph: Any, create_graph: Any) -> tuple:
        if isinstance(tensors, torch.Tensor):
            roots: tuple = (tensors,)
        elif isinstance(tensors, (list, tuple)):
            roots = tuple(t for t in tensors if isinstance(t, torch.Tensor))
        else:
            roots = ()
        retain = create_graph if retain_graph is None else bool(retain_graph)
        # the innermost user frame: Tensor.backward's caller, usually (found without user_frame's
        # call when that caller is user code seen before); frame 0 is this function, 1 the wrapper
        caller = sys._getframe(2)
        if caller.f_code is tensor_backward:
            caller = caller.f_back
        if caller is not None and not user_codes.get(id(caller.f_code)):
            caller = frames.user_frame(caller)
        if caller is None:
            checked = see(("B", None, -1, retain, bool(create_graph), len(roots)))
            where = None
        else:
            code, lasti = caller.f_code, caller.f_lasti
            checked = see(("B", code, lasti, retain, bool(create_graph), len(roots)))
            where = locations.get((id(code), lasti)) or frames.frame_location(caller)
        # the end of this backward may bound the cycles of a loop without an optimizer
        bounds = cadence.level <= BACKWARD and not state.in_step
        call = BackwardCall(roots, retain, bool(create_graph), where, state.backward_count,
                            state.step)
        if checked:
            if h["on_backward"]:
                bus.emit_to("on_backward", h["on_backward"], (call,))
        else:
            for check, method in always["on_backward"]:  # (Bus.emit_settled, inlined)
                try:
                    method(call)
                except Exception as exc:
                    bus.check_failed(check, "on_backward", exc)
                except Overrun:  # (no deadline on settled calls: never, in practice)
                    bus.overran(check, "on_backward", time.perf_counter())
        return call, checked, bounds
    return begin


def _failed(bus: "Bus") -> Callable:
    """``failed(call, exc)``: the backward raised ``exc`` (``on_backward_failed``). Never raises."""
    h = bus.handlers
    backwards = bus.state.backwards

    def failed(call: BackwardCall, exc: BaseException) -> None:
        try:
            call.failed = True
            if h["on_backward_failed"]:
                bus.emit("on_backward_failed", call, exc)
            call.tensors = ()
            backwards.append(call)
        except Exception as err:
            bus.hook_failed("torch.autograd.backward", err)
    return failed


def _done(bus: "Bus") -> Callable:
    """``done(call, checked, bounds)``: the backward returned; its events and counters. Never
    raises."""
    state = bus.state
    cadence = bus.cadence
    h = bus.handlers
    backwards = state.backwards

    def done(call: BackwardCall, checked: bool, bounds: bool) -> None:
        try:
            state.backward_count += 1
            if checked and h["on_backward_done"]:
                bus.emit_to("on_backward_done", h["on_backward_done"], (call,))
            call.tensors = ()  # keep no reference to the user's graph
            backwards.append(call)
            if bounds:
                cadence.call_end(BACKWARD, call.where, bus.reports, bool(bus.armed))
        except Exception as exc:
            bus.hook_failed("torch.autograd.backward", exc)
    return done
