"""The module-call probe: ``nn.Module.__call__``, wrapped.

Outermost calls, loss modules and the module types a check asks for (``Check.module_types``)
become events (``on_forward_pre``, ``on_forward``, ``on_root_forward``, ``on_loss``); any other
inner call only passes through and keeps PyTorch's hook-free fast path. (PyTorch's global module
hooks, ``register_module_forward_pre_hook``/``register_module_forward_hook``, would send every
module of every forward through ``Module._call_impl``'s slow path: about 10 us per module, 5-10%
of a small training step, before any check runs.)

Facts kept (``State``): ``modules``/``stack`` (the calls in progress), ``root_forwards``,
``models``, ``failed_module``/``failed_inputs``/``failed_root`` (the innermost module a failing
call passed through, read from its traceback), and the stamps on outputs (``stamps.py``).

Every call returns at once while ``torch.compile`` traces (``torch.compiler.is_dynamo_compiling()``,
which Dynamo folds to True, and ``is_compiling()`` where ``torch.export`` may trace too), so
compiled graphs are unchanged. Each outermost call also gives a key (``Cadence.see``): once the
loop has settled, a call matching the settled cycle only updates the counters (and goes to the
checks' ``always`` handlers: ``on_root_forward``, and ``on_loss`` for a loss module).
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any, Callable

from trainguard.sanitize.core import frames
from trainguard.sanitize.core.bounds import Overrun
from trainguard.sanitize.core.cadence import FORWARD
from trainguard.sanitize.core.records import ForwardCall, LossCall
from trainguard.sanitize.probes.functional import loss_sig
from trainguard.sanitize.probes.patch import Undo, compiling_flags, patch, transform_level
from trainguard.sanitize.probes.stamps import stamper

if TYPE_CHECKING:
    from trainguard.sanitize.core.bus import Bus

__all__ = ["attach"]


def attach(bus: "Bus") -> list[Undo]:
    """Wrap ``nn.Module.__call__`` (see the module docstring); returns the undo action."""
    from torch import nn

    undo: list[Undo] = []
    original_call = nn.Module.__call__
    # ``Module.__call__`` is ``_wrapped_call_impl``: ``self._compiled_call_impl`` (set by
    # ``module.compile()``) when there is one, else ``self._call_impl``. Outside Dynamo's tracing
    # the wrapper makes that choice itself, so a call costs one Python frame less than through the
    # original (a torch whose ``__call__`` is something else gets the original every time).
    direct = original_call is getattr(nn.Module, "_wrapped_call_impl", None)
    stamp = stamper(bus)
    forward_end = _forward_end(bus)
    begin = _begin(bus)
    settled = _settled(bus, original_call, direct, stamp, forward_end)
    checked = _checked(bus, original_call, stamp, forward_end)
    wrapper = _module_call(bus, original_call, direct, begin, settled, checked)
    patch(nn.Module, "__call__", lambda orig: wrapper, undo)
    return undo


def _module_call(bus: "Bus", original_call: Any, direct: bool, begin: Callable,
                 settled: Callable, checked: Callable) -> Callable:
    """The wrapper itself: the fast paths, then a checked or a settled call."""
    import torch
    from torch.nn.modules.loss import _Loss

    is_dynamo_compiling = torch.compiler.is_dynamo_compiling
    # torch.compiler.is_compiling() without its call (True while torch.export traces): the
    # wrapper has returned already when Dynamo traces, so the flag alone answers
    compiling = compiling_flags()
    modules = bus.state.modules
    full_types = (_Loss, *bus.module_types)
    in_transform = transform_level()

    def module_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if is_dynamo_compiling():
            # Traced by torch.compile (Dynamo folds the test to True, so it puts no guard on the
            # watcher's state): PyTorch's own call, as without the watcher.
            return original_call(self, *args, **kwargs)
        if modules and not isinstance(self, full_types):
            # An inner module no check asked about: straight to PyTorch's call (a failure is
            # located from the traceback by the outermost call).
            if not direct or self._compiled_call_impl is not None:
                return original_call(self, *args, **kwargs)
            if kwargs:  # (a transformer's layers: hidden states, then masks by name)
                return self._call_impl(*args, **kwargs)
            return self._call_impl(*args)  # (most calls: no keyword dict to rebuild)
        if compiling._is_compiling_flag or in_transform() is not None:
            # traced by torch.export, or run inside torch.func's vmap/grad (per-sample gradients,
            # model ensembles): a function of the transform, whose tensors hold no readable values
            return original_call(self, *args, **kwargs)
        try:
            depth = len(modules)
            caller = sys._getframe(1) if depth == 0 else None
            call = begin(self, args, kwargs, depth, caller)
        except Exception as exc:
            bus.hook_failed("nn.Module.__call__", exc)
            return original_call(self, *args, **kwargs)
        if call is None:
            return settled(self, args, kwargs, depth, caller)
        return checked(self, args, kwargs, depth, call)
    return module_call


def _begin(bus: "Bus") -> Callable:
    """``begin(module, args, kwargs, depth, caller)``: the call's :class:`ForwardCall` when the
    checks see it, None when it repeats the settled cycle (counters only)."""
    import torch
    from torch.nn.modules.loss import _Loss

    is_grad_enabled = torch.is_grad_enabled
    state = bus.state
    see = bus.cadence.see

    def begin(self: Any, args: tuple, kwargs: dict, depth: int, caller: Any) -> ForwardCall | None:
        if depth:
            if isinstance(self, _Loss) and not see(("L", type(self), *loss_sig(args, kwargs))):
                return None
            return ForwardCall(self, args, depth, self.training, is_grad_enabled(), None)
        grad = is_grad_enabled()
        if isinstance(self, _Loss):
            # by type: a loss module built inside the loop is a new object every step
            key: tuple = ("F", type(self), caller.f_code, caller.f_lasti, self.training, grad,
                          state.no_grad_depth, state.in_backward, state.in_step,
                          *loss_sig(args, kwargs))
        else:
            # the caller's own call site and the DataLoader iterated last too: a training step's
            # function called from another line or on another loader (a validation pass through
            # it) is not the settled cycle
            back = caller.f_back
            key = ("F", id(self), caller.f_code, caller.f_lasti,
                   back.f_code if back is not None else None,
                   back.f_lasti if back is not None else -1, state.loader_id, self.training,
                   grad, state.no_grad_depth, state.in_backward, state.in_step)
        state.failed_module = None
        if not see(key):
            return None  # a settled step: counters only
        call = ForwardCall(self, args, 0, self.training, grad, frames.user_location(caller))
        call.kwargs = kwargs
        call.direct = frames.is_user_code(caller.f_code)
        call.reenabled = state.no_grad_depth > 0 and grad
        return call
    return begin


def _settled(bus: "Bus", original_call: Any, direct: bool, stamp: Any,
             forward_end: Callable) -> Callable:
    """``settled(module, args, kwargs, depth, caller)``: a call of a settled step. The counters,
    the stamps and the checks' ``always`` handlers of ``on_root_forward`` only."""
    import torch
    from torch.nn.modules.loss import _Loss

    is_grad_enabled = torch.is_grad_enabled
    user_codes = frames._is_user_code  # id(code) -> bool, read directly on the settled path
    locations = frames._locations  # (id(code), f_lasti) -> location, likewise
    state = bus.state
    modules = state.modules
    seen_models = state.models
    seen_ids = seen_models._refs  # id -> weak reference
    cadence = bus.cadence
    always = bus.always  # event -> the checks' always handlers (lists are replaced, not the dict)
    record = ForwardCall(None, (), 0, True, True, None)  # one record serves every settled call

    def settled(self: Any, args: tuple, kwargs: dict, depth: int, caller: Any) -> Any:
        grad = is_grad_enabled()
        modules.append(self)
        try:
            if direct and self._compiled_call_impl is None:  # (original_call, one frame less)
                output = self._call_impl(*args, **kwargs)
            else:
                output = original_call(self, *args, **kwargs)
        except BaseException as exc:
            if depth == 0:
                _failed(bus, exc, self, args, caller, None)
            raise
        finally:
            modules.pop()
        if depth or isinstance(self, _Loss):
            if always["on_loss"] and isinstance(self, _Loss):  # (TG405 reads the loss)
                loss = LossCall(type(self).__name__, args, kwargs, output, self, None, caller)
                bus.emit_settled("on_loss", loss)
                loss._frame = None
            return output
        state.root_forwards += 1
        if id(self) not in seen_ids:
            seen_models.add(self)
        code = caller.f_code  # (user_location's cached case, without the call)
        where = locations.get((id(code), caller.f_lasti)) if user_codes.get(id(code)) else None
        if where is None:
            where = frames.user_location(caller)
        if stamp is not None and grad:  # stamped on settled steps too (TG201/202/203)
            stamp(self, output, where, args, kwargs)
        handlers = always["on_root_forward"]
        if handlers:
            # the checks read the record during the event only
            record.module, record.args, record.output = self, args, output
            record.training, record.grad_enabled, record.where = self.training, grad, where
            for check, method in handlers:  # (Bus.emit_settled, inlined)
                try:
                    method(record)
                except Exception as exc:
                    bus.check_failed(check, "on_root_forward", exc)
                except Overrun:  # (no deadline on settled calls: never, in practice)
                    bus.overran(check, "on_root_forward", time.perf_counter())
            record.module = record.args = record.output = None
        if cadence.level <= FORWARD and not state.in_step and not state.in_backward:
            forward_end(self, where)  # (an inference loop: its forward bounds the cycles)
        return output
    return settled


def _checked(bus: "Bus", original_call: Any, stamp: Any, forward_end: Callable) -> Callable:
    """``checked(module, args, kwargs, depth, call)``: a call the checks see."""
    state = bus.state
    modules, stack = state.modules, state.stack
    h = bus.handlers
    after = _after_forward(bus, stamp, forward_end)

    def checked(self: Any, args: tuple, kwargs: dict, depth: int, call: ForwardCall) -> Any:
        modules.append(self)
        stack.append(call)
        if h["on_forward_pre"]:
            bus.emit_module("on_forward_pre", call)  # never raises: a failing check becomes TG002
        try:
            output = original_call(self, *args, **kwargs)
        except BaseException as exc:
            try:
                call.failed = True
                if depth == 0:
                    _failed(bus, exc, self, args, None, call.where)
                if h["on_forward"]:
                    bus.emit_module("on_forward", call)
            except Exception as err:
                bus.hook_failed("nn.Module.__call__", err)
            raise
        finally:
            modules.pop()
            stack.pop()
        try:
            # the frame that called the module (for a loss module's line)
            after(call, output, depth, kwargs, sys._getframe(2))
        except Exception as exc:
            bus.hook_failed("nn.Module.__call__", exc)
        return output
    return checked


def _after_forward(bus: "Bus", stamp: Any, forward_end: Callable) -> Callable:
    """The events after a checked call returned."""
    from torch.nn.modules.loss import _Loss

    state = bus.state
    h = bus.handlers
    cadence = bus.cadence

    def after(call: ForwardCall, output: Any, depth: int, kwargs: dict, caller: Any) -> None:
        self = call.module
        call.output = output
        if h["on_forward"]:
            bus.emit_module("on_forward", call)
        if isinstance(self, _Loss):
            if h["on_loss"]:
                where = call.where or frames.user_location(caller)
                bus.emit("on_loss", LossCall(type(self).__name__, call.args, kwargs, output,
                                             self, where))
        elif depth == 0:
            state.root_forwards += 1
            state.models.add(self)
            if stamp is not None and call.grad_enabled:
                call.made = stamp(self, output, call.where, call.args, kwargs)
            if h["on_root_forward"]:
                bus.emit_to("on_root_forward", h["on_root_forward"], (call,))
            if cadence.level <= FORWARD and not state.in_step and not state.in_backward:
                forward_end(self, call.where)
    return after


def _forward_end(bus: "Bus") -> Callable:
    cadence = bus.cadence

    def forward_end(module: Any, where: Any) -> None:
        """A model's outermost call returned in a loop bounded by forwards (or by nothing yet)."""
        try:
            cadence.call_end(FORWARD, (id(module), where), bus.reports, bool(bus.armed))
        except Exception as exc:
            bus.hook_failed("nn.Module.__call__", exc)
    return forward_end


def _failed(bus: "Bus", exc: BaseException, root: Any, args: tuple, caller: Any,
            where: Any) -> None:
    """An outermost call of ``root`` raised ``exc``: note the innermost module it passed through
    and send ``on_forward_failed`` (the user's line: ``where``, else read from ``caller``)."""
    state = bus.state
    state.failed_root = root
    _locate_failure(state, exc, root, args)
    if bus.handlers["on_forward_failed"] and not isinstance(exc, (KeyboardInterrupt, SystemExit)):
        try:
            if where is None and caller is not None:
                where = frames.user_location(caller)
            bus.emit("on_forward_failed", root, exc, where)
        except Exception as err:  # never in the way of the user's error
            bus.hook_failed("nn.Module.__call__", err)


def _locate_failure(state: Any, exc: BaseException, root: Any, args: tuple) -> None:
    """Set ``state.failed_module``/``failed_inputs`` to the innermost module whose call the
    exception passed through, read from its traceback (``Module._call_impl`` frames hold the
    module as ``self`` and its positional inputs as ``args``). Never raises."""
    try:
        from torch import nn

        impl = (nn.Module._call_impl.__code__, nn.Module._wrapped_call_impl.__code__)
        module, inputs, named = root, args, {}
        tb = exc.__traceback__
        while tb is not None:
            frame = tb.tb_frame
            if frame.f_code in impl:
                found = frame.f_locals.get("self")
                if isinstance(found, nn.Module):
                    module = found
                    inputs, named = frame.f_locals.get("args", ()), frame.f_locals.get("kwargs", {})
            tb = tb.tb_next
        state.failed_module = module
        state.failed_inputs = _inputs(inputs if isinstance(inputs, tuple) else (),
                                      named if isinstance(named, dict) else {})
    except Exception:  # a diagnosis aid only: never in the way of the user's error
        state.failed_module, state.failed_inputs = root, []


_INPUT_DEPTH, _INPUT_WIDTH = 3, 16  # how far into nested arguments a failure is read


def _inputs(args: tuple, kwargs: dict) -> list[tuple[str, tuple[int, ...], str]]:
    """``(where, shape, device)`` of the tensors among the arguments of a call that raised, also
    inside tuples, lists and dicts (an RNN's ``(h0, c0)``), 3 levels and 16 items per level at
    most; ``where`` is ``"input 1"``, ``"input 1[0]"``, ``"hx"``."""
    import torch

    found: list[tuple[str, tuple[int, ...], str]] = []

    def visit(value: Any, where: str, depth: int) -> None:
        if isinstance(value, torch.Tensor):
            found.append((where, tuple(value.shape), str(value.device)))
        elif depth < _INPUT_DEPTH and isinstance(value, (tuple, list)):
            for i, item in enumerate(value[:_INPUT_WIDTH]):
                visit(item, f"{where}[{i}]", depth + 1)
        elif depth < _INPUT_DEPTH and isinstance(value, dict):
            for i, (key, item) in enumerate(value.items()):
                if i >= _INPUT_WIDTH:
                    break
                visit(item, f"{where}[{key!r}]", depth + 1)

    for i, a in enumerate(args[:_INPUT_WIDTH]):
        visit(a, f"input {i}", 1)
    for i, (key, a) in enumerate(kwargs.items()):
        if i >= _INPUT_WIDTH:
            break
        visit(a, str(key), 1)
    return found
