"""The functional probe: ``torch.nn.functional`` losses and dropout, wrapped.

- the losses in :data:`FUNCTIONAL_LOSSES` become ``on_loss`` events (a loss module's own call to
  its function is covered by the module's event, not repeated);
- the dropout functions in :data:`FUNCTIONAL_WATCHED` (and ``torch.dropout`` and its siblings in
  :data:`TORCH_WATCHED`, named ``torch.dropout`` in the event) become ``on_functional`` events;
  during the event ``State.functional_caller`` is the frame that called the function.

Installed only when a check listens to those events. Each call also gives a cadence key; a
settled loss call goes to the checks' ``always`` handlers of ``on_loss`` only.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from trainguard.apifacts import FUNCTIONAL_LOSSES
from trainguard.sanitize.core.records import LossCall
from trainguard.sanitize.probes.patch import Undo, compiling_flags, patch, transform_level

if TYPE_CHECKING:
    from trainguard.sanitize.core.bus import Bus

__all__ = ["attach", "FUNCTIONAL_LOSSES", "FUNCTIONAL_WATCHED", "TORCH_WATCHED", "loss_sig"]

FUNCTIONAL_WATCHED = (
    "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
    "scaled_dot_product_attention",
)
"""The ``torch.nn.functional`` functions (other than losses) whose calls are ``on_functional``
events (``nn.MultiheadAttention`` calls ``scaled_dot_product_attention`` itself, with
``dropout_p=0`` in eval mode)."""
TORCH_WATCHED = ("dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout")
"""The ``torch`` functions whose calls are ``on_functional`` events, as ``torch.<name>`` (their
``train`` flag is required; ``F.dropout`` does not call them)."""


def attach(bus: "Bus") -> list[Undo]:
    """Wrap the functional losses (``on_loss``) and dropouts (``on_functional``) when a check
    listens to them; returns the undo actions."""
    import torch
    import torch.nn.functional as F
    from torch.nn.modules.loss import _Loss

    undo: list[Undo] = []
    if bus.handlers["on_loss"]:
        for name in FUNCTIONAL_LOSSES:
            patch(F, name, lambda orig, name=name: _functional_loss(bus, name, orig, _Loss), undo)
    if bus.handlers["on_functional"]:
        for name in FUNCTIONAL_WATCHED:
            patch(F, name, lambda orig, name=name: _functional(bus, name, orig), undo)
        for name in TORCH_WATCHED:
            if hasattr(torch, name):
                patch(torch, name, lambda orig, name=name: _in_graph(
                    _functional(bus, f"torch.{name}", orig), orig), undo)
    return undo


def loss_sig(args: tuple, kwargs: dict) -> tuple:
    """Shapes and dtypes of a loss call's input and target, for a cycle key."""
    if len(args) > 1:
        given, target = args[0], args[1]
        try:  # (the usual call: two tensors, no getattr calls)
            return (given.shape, given.dtype, target.shape, target.dtype)
        except AttributeError:
            pass
    else:
        given = args[0] if args else kwargs.get("input")
        target = kwargs.get("target")
    return (getattr(given, "shape", None), getattr(given, "dtype", None),
            getattr(target, "shape", None), getattr(target, "dtype", None))


def _functional_loss(bus: "Bus", name: str, original: Any, loss_type: type) -> Any:
    import torch

    # torch.compiler.is_compiling(), one call cheaper: Dynamo folds the first test to True
    is_dynamo_compiling = torch.compiler.is_dynamo_compiling
    compiling = compiling_flags()
    modules = bus.state.modules
    see = bus.cadence.see
    always = bus.always  # event -> the checks' always handlers (lists are replaced, not the dict)
    in_transform = transform_level()

    def loss(*args: Any, **kwargs: Any) -> Any:
        try:
            output = original(*args, **kwargs)
        except Exception as exc:  # (a try costs nothing until it raises)
            if not (modules and isinstance(modules[-1], loss_type)):
                # (inside a loss module's forward, that module's own failure event follows,
                # with the module: its weight buffer's device, TG702)
                _loss_failed(bus, name, exc, sys._getframe(1))
            raise
        # A loss module calls this function itself; its own event covers it.
        if is_dynamo_compiling() or compiling._is_compiling_flag or (
                modules and isinstance(modules[-1], loss_type)) or in_transform() is not None:
            return output  # (inside torch.func's vmap/grad: see patch.transform_level)
        try:
            caller = sys._getframe(1)
            try:  # (loss_sig's usual case, inlined: this runs on every step, settled ones too)
                given, target = args[0], args[1]
                sig: tuple = (given.shape, given.dtype, target.shape, target.dtype)
            except (IndexError, AttributeError):
                sig = loss_sig(args, kwargs)
            if not see(("L", name, caller.f_code, caller.f_lasti, sig)):
                if always["on_loss"]:  # (a settled step: TG405 reads the loss)
                    call = LossCall(name, args, kwargs, output, None, None, caller)
                    bus.emit_settled("on_loss", call)
                    call._frame = None
                return output
            call = LossCall(name, args, kwargs, output, None, None, caller)
            bus.emit("on_loss", call)
            call._frame = None
        except Exception as exc:
            bus.hook_failed(f"F.{name}", exc)
        return output
    return loss


def _loss_failed(bus: "Bus", name: str, exc: BaseException, caller: Any) -> None:
    """A functional loss raised (``Target 17 is out of bounds``): ``on_forward_failed`` with no
    module, at the user's line, for checks that explain an error the script may catch."""
    if not bus.handlers["on_forward_failed"]:
        return
    try:
        from trainguard.sanitize.core import frames

        bus.emit("on_forward_failed", None, exc, frames.user_location(caller))
    except Exception as err:  # never in the way of the user's error
        bus.hook_failed(f"F.{name}", err)


def _in_graph(wrapper: Any, original: Any) -> Any:
    """``wrapper`` marked so that Dynamo sees ``original`` in its place. Dynamo knows the ``torch``
    builtins by the objects its name table (``torch._dynamo.trace_rules``: ``"torch.dropout"``)
    resolves to when it first compiles; resolved while the wrapper is in place, the builtin would
    be unknown and break the graph. The table unwraps ``_torchdynamo_inline`` (set by
    ``torch.compile``'s own wrappers), so the builtin stays in the graph and the wrapper, which
    does nothing while compiling, is never traced."""
    wrapper._torchdynamo_inline = original
    return wrapper


def _functional(bus: "Bus", name: str, original: Any) -> Any:
    import torch

    # torch.compiler.is_compiling() without its two calls (as in _functional_loss): Dynamo folds
    # the first test to True, the flag answers while torch.export traces
    is_dynamo_compiling = torch.compiler.is_dynamo_compiling
    compiling = compiling_flags()
    state = bus.state
    see = bus.cadence.see

    in_transform = transform_level()

    def observed(*args: Any, **kwargs: Any) -> Any:
        if not (is_dynamo_compiling() or compiling._is_compiling_flag) and in_transform() is None:
            caller = sys._getframe(1)
            if not see(("D", name, caller.f_code, caller.f_lasti)):
                return original(*args, **kwargs)
            state.functional_caller = caller
            try:
                bus.emit("on_functional", name, args, kwargs)
            finally:
                state.functional_caller = None
        return original(*args, **kwargs)
    return observed
