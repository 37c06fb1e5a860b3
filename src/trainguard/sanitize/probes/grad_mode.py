"""The grad-mode probe: ``torch.no_grad``/``torch.enable_grad`` blocks and ``Module.train``/``eval``.

Facts kept (``State``):

- ``no_grad_depth``: ``torch.no_grad()`` blocks open now (a forward with grad on inside one is
  re-enabled);
- ``enable_grad_at``: for each open ``torch.enable_grad()`` block, the user's line that opened it
  with grad mode off, or None;
- ``eval_at``: where user code last put a module in eval mode (an outermost
  ``eval()``/``train(False)``), until it calls ``train()`` on it again; only the outermost call
  counts (``Module.train`` calls itself on every child), and a run calls these per epoch, not per
  step.

Event: ``on_mode`` for each outermost ``train()``/``eval()`` call, before it runs (a
:class:`~trainguard.sanitize.core.records.ModeCall`: the module, the mode asked for and the one it
had, whether user code made the call), sent only while a check listens.

``torch.set_grad_enabled`` is left alone: every ``optimizer.step()`` calls it twice, and a forward
with grad on inside an open ``no_grad`` block is re-enabled either way.
"""

from __future__ import annotations

import sys
import weakref
from typing import TYPE_CHECKING, Any

from trainguard.sanitize.core import frames
from trainguard.sanitize.core.records import ModeCall
from trainguard.sanitize.probes.patch import Undo, patch

if TYPE_CHECKING:
    from trainguard.sanitize.core.bus import Bus

__all__ = ["attach"]


def attach(bus: "Bus") -> list[Undo]:
    """Wrap the grad-mode blocks and ``Module.train``; returns the undo actions."""
    undo: list[Undo] = []
    _grad_mode(bus, undo)
    _mode_calls(bus, undo)
    return undo


def _grad_mode(bus: "Bus", undo: list[Undo]) -> None:
    import torch
    from torch.autograd import grad_mode

    state = bus.state
    is_grad_enabled = torch.is_grad_enabled

    def make_no_grad_enter(original: Any) -> Any:
        def __enter__(self: Any) -> Any:
            state.no_grad_depth += 1
            return original(self)
        return __enter__

    def make_no_grad_exit(original: Any) -> Any:
        def __exit__(self: Any, *exc: Any) -> Any:
            state.no_grad_depth = max(0, state.no_grad_depth - 1)
            return original(self, *exc)
        return __exit__

    def make_enable_enter(original: Any) -> Any:
        def __enter__(self: Any) -> Any:
            was = is_grad_enabled()
            result = original(self)
            try:
                frame = sys._getframe(1)
                if not was and frames.is_user_code(frame.f_code):
                    state.enable_grad_at.append(frames.user_location(frame))
                else:
                    state.enable_grad_at.append(None)
            except Exception as exc:
                bus.hook_failed("torch.enable_grad", exc)
            return result
        return __enter__

    def make_enable_exit(original: Any) -> Any:
        def __exit__(self: Any, *exc: Any) -> Any:
            if state.enable_grad_at:
                state.enable_grad_at.pop()
            return original(self, *exc)
        return __exit__

    patch(grad_mode.no_grad, "__enter__", make_no_grad_enter, undo)
    patch(grad_mode.no_grad, "__exit__", make_no_grad_exit, undo)
    patch(grad_mode.enable_grad, "__enter__", make_enable_enter, undo)
    patch(grad_mode.enable_grad, "__exit__", make_enable_exit, undo)


def _mode_calls(bus: "Bus", undo: list[Undo]) -> None:
    """Wrap ``nn.Module.train`` (``eval()`` calls it): ``State.eval_at``, and an ``on_mode`` event
    for each outermost call when a check listens."""
    from torch import nn

    eval_at = bus.state.eval_at
    h = bus.handlers
    depth = [0]  # nn.Module.train calls in progress (it recurses into children)
    by_library: list[Any] = [None]  # a weak reference to the module a library last put in eval

    def mode_call(module: Any, mode: bool, frame: Any) -> None:
        caller = _mode_caller(frame)
        direct = frames.is_user_code(caller.f_code)
        call = ModeCall(module, mode, module.training, direct, caller)
        if not mode:
            by_library[0] = None if direct else weakref.ref(module)
        elif by_library[0] is not None and by_library[0]() is module:
            call.after_library_eval = True
        bus.emit("on_mode", call)

    def make_train(original: Any) -> Any:
        def train(self: Any, mode: bool = True) -> Any:
            if depth[0] == 0:
                try:
                    if mode:
                        eval_at.pop(id(self), None)
                    else:
                        eval_at[id(self)] = (weakref.ref(self),
                                             frames.user_location(sys._getframe(1)))
                        if len(eval_at) > 256:  # modules put in eval mode and dropped
                            for key in [k for k, (ref, _) in eval_at.items() if ref() is None]:
                                del eval_at[key]
                    if h["on_mode"]:
                        mode_call(self, bool(mode), sys._getframe(1))
                except Exception as exc:
                    bus.hook_failed("nn.Module.train", exc)
            depth[0] += 1
            try:
                return original(self, mode)
            finally:
                depth[0] -= 1
        return train

    patch(nn.Module, "train", make_train, undo)


def _mode_caller(frame: Any) -> Any:
    """The frame that called ``train()``/``eval()``, past overrides that call ``super()``'s
    (``transformers.PreTrainedModel.train``, a LightningModule's own ``train``)."""
    while frame.f_code.co_name in ("train", "eval") and frame.f_back is not None:
        frame = frame.f_back
    return frame
