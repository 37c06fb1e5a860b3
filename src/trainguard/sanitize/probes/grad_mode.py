"""The grad-mode probe: ``no_grad``/``enable_grad``/``set_grad_enabled``, ``Module.train``/``eval``.

Facts kept (``State``):

- ``no_grad_depth``: ``torch.no_grad()`` blocks open now (a forward with grad on inside one is
  re-enabled);
- ``enable_grad_at``: for each open ``torch.enable_grad()`` block, the user's line that opened it
  with grad mode off, or None;
- ``grad_on_at``: the user's line of the latest ``torch.set_grad_enabled(True)`` or
  ``torch.enable_grad()`` made inside an open ``no_grad`` block with grad mode off, kept until
  that block closes (an ``enable_grad`` inside a model's ``forward`` has closed by the time the
  call returns); ``optimizer.step()`` calls ``set_grad_enabled`` with False, which costs one
  test; for ``enable_grad``/``set_grad_enabled`` used as a decorator, the decorator's line;
- ``grad_off_at``: the user's line of the latest ``torch.set_grad_enabled(False)`` user code
  called, until it calls ``set_grad_enabled(True)`` (TG204 reads whether it was a bare
  statement: a global switch whose ``True`` an exception skipped);
- ``eval_at``: where user code last put a module in eval mode (an outermost
  ``eval()``/``train(False)``), until it calls ``train()`` on it again; only the outermost call
  counts (``Module.train`` calls itself on every child), and a run calls it per epoch, not per
  step. The mode checks report at this line (the cause); the ``train()`` calls reach them as
  ``on_mode`` events.

Event: ``on_grad_block_exit`` when a user's ``with torch.enable_grad():`` block that turned grad
back on inside a ``no_grad`` block closes (its opening line, the frame that ran it, and the ids of
the ``grad_fn`` its local tensors had when it opened; read only while a check listens).

Event: ``on_mode`` for each outermost ``train()``/``eval()`` call, before it runs (a
:class:`~trainguard.sanitize.core.records.ModeCall`: the module, the mode asked for and the one it
had, whether user code made the call), sent only while a check listens.
"""

from __future__ import annotations

import sys
import weakref
from typing import TYPE_CHECKING, Any

from trainguard.sanitize.core import frames
from trainguard.sanitize.core.escapes import grad_fn_ids
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
    blocks: list[Any] = []  # per open enable_grad block: (opener, locals' grad_fn ids) or None

    def make_no_grad_enter(original: Any) -> Any:
        def __enter__(self: Any) -> Any:
            state.no_grad_depth += 1
            return original(self)
        return __enter__

    def make_no_grad_exit(original: Any) -> Any:
        def __exit__(self: Any, *exc: Any) -> Any:
            state.no_grad_depth = max(0, state.no_grad_depth - 1)
            if not state.no_grad_depth:
                state.grad_on_at = None
            return original(self, *exc)
        return __exit__

    def make_enable_enter(original: Any) -> Any:
        def __enter__(self: Any) -> Any:
            was = is_grad_enabled()
            result = original(self)
            try:
                opener = None
                if not was:
                    opener = _grad_opener(sys._getframe(1))
                elif state.no_grad_depth and state.reenabled_at():
                    # user code's own block inside a re-enabled region: False
                    opener = False if _grad_opener(sys._getframe(1)) is not None else None
                state.enable_grad_at.append(opener)
                if opener is not None and state.no_grad_depth:
                    state.grad_on_at = opener  # kept after the block closes (TG104)
                watched = opener and state.no_grad_depth and bus.handlers["on_grad_block_exit"]
                blocks.append((opener, grad_fn_ids(sys._getframe(1))) if watched else None)
            except Exception as exc:
                bus.hook_failed("torch.enable_grad", exc)
            return result
        return __enter__

    def make_enable_exit(original: Any) -> Any:
        def __exit__(self: Any, *exc: Any) -> Any:
            if state.enable_grad_at:
                state.enable_grad_at.pop()
            block = blocks.pop() if blocks else None
            result = original(self, *exc)
            if block is not None and exc[:1] in ((), (None,)):
                try:  # a user's block re-enabling grad in a no_grad region closes (TG104)
                    bus.emit("on_grad_block_exit", block[0], sys._getframe(1), block[1])
                except Exception as e:
                    bus.hook_failed("torch.enable_grad", e)
            return result
        return __exit__

    patch(grad_mode.no_grad, "__enter__", make_no_grad_enter, undo)
    patch(grad_mode.no_grad, "__exit__", make_no_grad_exit, undo)
    patch(grad_mode.enable_grad, "__enter__", make_enable_enter, undo)
    patch(grad_mode.enable_grad, "__exit__", make_enable_exit, undo)
    patch(grad_mode.set_grad_enabled, "__init__", _set_grad_enabled_maker(bus), undo)


def _set_grad_enabled_maker(bus: "Bus") -> Any:
    """The wrapper maker of ``set_grad_enabled.__init__``: ``grad_off_at`` and ``grad_on_at``."""
    import torch

    state = bus.state
    is_grad_enabled = torch.is_grad_enabled

    def make_set_grad_enabled(original: Any) -> Any:
        # ``torch.set_grad_enabled(mode)`` sets the mode in ``__init__`` (as a function, as a
        # context manager and, through ``clone()``, as a decorator); ``optimizer.step()`` calls it
        # twice (False, then True outside any no_grad block), each returning after two tests
        def __init__(self: Any, mode: bool) -> None:
            # (TG204: a switch left off) a True with none noted has nothing to clear: no frame
            # read for the calls no_grad blocks make on entry and exit
            if not mode or state.grad_off_at is not None:
                try:
                    caller = sys._getframe(1)
                    if frames.is_user_code(caller.f_code):
                        state.grad_off_at = None if mode else frames.frame_location(caller)
                except Exception as exc:
                    bus.hook_failed("torch.set_grad_enabled", exc)
            if not (mode and state.no_grad_depth):  # (optimizer.step()'s calls: one test)
                original(self, mode)
                return
            was = is_grad_enabled()
            original(self, mode)
            if not was:
                try:
                    state.grad_on_at = _grad_opener(sys._getframe(1))
                except Exception as exc:
                    bus.hook_failed("torch.set_grad_enabled", exc)
        return __init__
    return make_set_grad_enabled


def _grad_opener(frame: Any) -> Any:
    """The user's line that turned grad mode on from ``frame`` (the caller of ``enable_grad``'s
    ``__enter__`` or ``set_grad_enabled``'s ``__init__``): that frame's line when it is user code;
    for a decorated function (``@torch.enable_grad()``: torch's ``decorate_context`` runs the
    context), the decorator line (a decorated function's ``co_firstlineno``); else None (PyTorch's
    own re-enabling, an LBFGS closure)."""
    for _ in range(3):  # set_grad_enabled as a decorator: __init__ <- clone <- decorate_context
        if frame is None:
            return None
        code = frame.f_code
        if frames.is_user_code(code):
            return frames.user_location(frame)
        if code.co_name == "decorate_context":
            inner = getattr(frame.f_locals.get("func"), "__code__", None)
            if inner is not None and frames.is_user_code(inner):
                return (inner.co_filename, inner.co_firstlineno, 1)
            return None
        frame = frame.f_back
    return None


def _mode_calls(bus: "Bus", undo: list[Undo]) -> None:
    """Wrap ``nn.Module.train`` (``eval()`` calls it): ``State.eval_at``, and an ``on_mode`` event
    for each outermost call when a check listens."""
    from torch import nn

    state = bus.state
    eval_at = state.eval_at
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
    from torch import nn

    while (frame.f_code.co_name in ("train", "eval") and frame.f_back is not None
           and isinstance(frame.f_locals.get("self"), nn.Module)):  # (not a Trainer's train())
        frame = frame.f_back
    return frame
