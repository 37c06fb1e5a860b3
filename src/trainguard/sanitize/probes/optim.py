"""The optimizer probe: ``optimizer.step()``, ``zero_grad``, LR schedulers and gradient clipping.

- ``optimizer.step()``: PyTorch's global step pre/post hooks
  (``torch.optim.optimizer.register_optimizer_step_pre_hook``/``..._post_hook``) send
  ``on_step_pre``/``on_step``; facts kept (``State``): ``step``, ``in_step``, ``optimizers``,
  ``backwards_at_step``, ``last_stepped``. The end of a step is the cadence's cycle boundary.
  On checked steps a ``step(closure)`` gets the closure wrapped (the pre-hook returns the new
  arguments, as ``register_optimizer_step_pre_hook`` allows) to send ``on_closure`` before each
  evaluation; the closure itself and its result are unchanged.
- ``Optimizer.zero_grad``/``Module.zero_grad``: ``on_zero_grad`` (when a check listens);
- ``LRScheduler.step`` and every scheduler class that overrides it: ``on_scheduler_step``, for calls
  made by user code only (not the ``step()`` a scheduler's constructor makes, not a
  ``SequentialLR``/``ChainedScheduler`` stepping its children);
- ``torch.nn.utils.clip_grad_norm_``/``clip_grad_value_``: ``on_clip``, with the parameters read
  once into a list (which the original then receives: it accepts any iterable);
- ``torch.amp.GradScaler.unscale_`` (the user's call, or the one ``scaler.step`` makes):
  ``on_unscale``, before it divides the gradients.

Optimizer steps, zero_grad and schedulers are never traced by ``torch.export``, so Dynamo's own
test (one call, folded to True while Dynamo traces) is enough for them.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

from trainguard.sanitize.core.bounds import Overrun
from trainguard.sanitize.core.frames import is_user_file
from trainguard.sanitize.probes.patch import Undo, patch

if TYPE_CHECKING:
    from trainguard.sanitize.core.bus import Bus

__all__ = ["attach"]


def attach(bus: "Bus") -> list[Undo]:
    """Install the step hooks, and the zero_grad, scheduler and clipping wrappers some check
    listens to; returns the undo actions."""
    undo = _step_hooks(bus)
    h = bus.handlers
    if h["on_zero_grad"]:
        _zero_grad(bus, undo)
    if h["on_scheduler_step"]:
        _schedulers(bus, undo)
    if h["on_clip"]:
        import torch

        for name in ("clip_grad_norm_", "clip_grad_value_"):
            patch(torch.nn.utils, name, lambda orig, name=name: _clip(bus, name, orig), undo)
    if h["on_unscale"]:
        _unscale(bus, undo)
    return undo


def _unscale(bus: "Bus", undo: list[Undo]) -> None:
    """``GradScaler.unscale_`` (called by the user, or by ``scaler.step``): ``on_unscale`` as
    it is about to divide the optimizer's gradients by the scale, and whether user code called
    it."""
    from torch.amp import GradScaler

    see = bus.cadence.see

    def make(original: Any) -> Any:
        def unscale_(self: Any, optimizer: Any) -> Any:
            try:
                caller = sys._getframe(1)
                if self.is_enabled() and see(("U", id(optimizer), caller.f_code, caller.f_lasti)):
                    bus.emit("on_unscale", self, optimizer,
                             is_user_file(caller.f_code.co_filename))
            except Exception as exc:
                bus.hook_failed("GradScaler.unscale_", exc)
            return original(self, optimizer)
        return unscale_
    patch(GradScaler, "unscale_", make, undo)


def _step_hooks(bus: "Bus") -> list[Undo]:
    import torch
    from torch.optim import optimizer as optim_mod

    is_dynamo_compiling = torch.compiler.is_dynamo_compiling
    state = bus.state
    stepped_ids = state.optimizers._refs
    cadence = bus.cadence
    see = cadence.see
    h = bus.handlers
    always = bus.always

    def step_pre(optimizer: Any, args: tuple, kwargs: dict) -> None:
        if is_dynamo_compiling():
            return None
        try:
            state.in_step += 1
            if id(optimizer) not in stepped_ids:
                state.optimizers.add(optimizer)
            if see(("S", id(optimizer))) and h["on_step_pre"]:
                bus.emit_to("on_step_pre", h["on_step_pre"], (optimizer,))
            if h["on_closure"] and not cadence.skipping:
                return _closure(bus, optimizer, args, kwargs)
        except Exception as exc:
            bus.hook_failed("Optimizer.step", exc)
        return None

    def step_post(optimizer: Any, args: tuple, kwargs: dict) -> None:
        if is_dynamo_compiling():
            return None
        try:
            if state.in_step:
                state.in_step -= 1
            state.step += 1
            state.backwards_at_step = state.backward_count
            state.last_stepped = id(optimizer)
            # No key of its own: the step's pre-hook key (and those of any calls its closure made)
            # already placed it in the cycle, so it is checked exactly when they were
            if not cadence.skipping:
                if h["on_step"]:
                    bus.emit_to("on_step", h["on_step"], (optimizer,))
            else:
                for check, method in always["on_step"]:  # (Bus.emit_settled, inlined)
                    try:
                        method(optimizer)
                    except Exception as exc:
                        bus.check_failed(check, "on_step", exc)
                    except Overrun:  # (no deadline on settled calls: never, in practice)
                        bus.overran(check, "on_step", time.perf_counter())
            cadence.boundary(optimizer, bus.reports, bool(bus.armed))
        except Exception as exc:
            bus.hook_failed("Optimizer.step", exc)
        return None

    return [optim_mod.register_optimizer_step_pre_hook(step_pre).remove,
            optim_mod.register_optimizer_step_post_hook(step_post).remove]


def _closure(bus: "Bus", optimizer: Any, args: tuple, kwargs: dict) -> Any:
    """``step(closure)``: the closure wrapped to send ``on_closure(optimizer, calls so far)``
    before each evaluation (LBFGS evaluates it several times per step)."""
    # (``args`` holds the optimizer first: the hook sees the wrapped method's arguments)
    closure = kwargs.get("closure", args[1] if len(args) > 1 else None)
    if not callable(closure):
        return None
    calls = [0]

    def evaluate(*a: Any, **k: Any) -> Any:
        bus.emit("on_closure", optimizer, calls[0])
        calls[0] += 1
        return closure(*a, **k)
    if "closure" in kwargs:
        return args, {**kwargs, "closure": evaluate}
    return (args[0], evaluate, *args[2:]), kwargs


def _zero_grad(bus: "Bus", undo: list[Undo]) -> None:
    import torch

    is_dynamo_compiling = torch.compiler.is_dynamo_compiling
    see = bus.cadence.see

    def make_zero_grad(original: Any) -> Any:
        def zero_grad(self: Any, set_to_none: bool = True) -> Any:
            if not is_dynamo_compiling():
                try:
                    caller = sys._getframe(1)
                    if see(("Z", id(self), bool(set_to_none), caller.f_code, caller.f_lasti)):
                        bus.emit("on_zero_grad", self, bool(set_to_none))
                except Exception as exc:
                    bus.hook_failed("zero_grad", exc)
            return original(self, set_to_none)
        return zero_grad
    patch(torch.optim.Optimizer, "zero_grad", make_zero_grad, undo)
    patch(torch.nn.Module, "zero_grad", make_zero_grad, undo)


def _clip(bus: "Bus", name: str, original: Any) -> Any:
    """Observe a gradient-clipping call; a generator of parameters is read once into a list, which
    is what the original then receives (it accepts any iterable)."""
    import torch

    is_compiling = torch.compiler.is_compiling
    see = bus.cadence.see

    def clip(parameters: Any, *args: Any, **kwargs: Any) -> Any:
        if is_compiling():
            return original(parameters, *args, **kwargs)
        caller = sys._getframe(1)
        if not see(("C", name, caller.f_code, caller.f_lasti)):
            return original(parameters, *args, **kwargs)
        params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
        bus.emit("on_clip", name, params)  # emit never raises: a failing check becomes TG002
        return original(params, *args, **kwargs)
    return clip


def _schedulers(bus: "Bus", undo: list[Undo]) -> None:
    """Wrap ``step`` of ``LRScheduler`` and of every scheduler class that overrides it."""
    import torch
    from torch.optim import lr_scheduler as lrs

    is_compiling = torch.compiler.is_compiling
    classes = [c for c in vars(lrs).values() if isinstance(c, type)
               and issubclass(c, lrs.LRScheduler) and "step" in c.__dict__]
    depth = [0]
    see = bus.cadence.see

    def make(original: Any) -> Any:
        def step(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                caller = sys._getframe(1)
                if (depth[0] == 0 and not is_compiling()
                        and is_user_file(caller.f_code.co_filename)
                        and see(("R", id(self), caller.f_code, caller.f_lasti))):
                    bus.emit("on_scheduler_step", self)
            except Exception as exc:
                bus.hook_failed("LRScheduler.step", exc)
            depth[0] += 1
            try:
                return original(self, *args, **kwargs)
            finally:
                depth[0] -= 1
        return step

    for cls in classes:
        patch(cls, "step", make, undo)
