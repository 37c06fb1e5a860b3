"""The global hooks and narrow wrappers the watcher installs, each undone on exit.

- module forward pre/post hooks (``torch.nn.modules.module.register_module_forward_pre_hook`` and
  ``register_module_forward_hook(always_call=True)``), so every module call is seen, including one
  that raises;
- optimizer step pre/post hooks (``torch.optim.optimizer.register_optimizer_step_pre_hook``/
  ``register_optimizer_step_post_hook``);
- wrappers of ``torch.autograd.backward`` (``Tensor.backward`` calls it), ``Optimizer.zero_grad``,
  ``Module.zero_grad``, ``torch.save``, ``torch.load`` and a few ``torch.nn.functional`` functions
  (losses and dropout), installed only when a check listens to them.

No ``TorchFunctionMode`` or dispatch mode: those see every op and cost 1.1-2.5x a training step.
Every hook returns at once while ``torch.compile`` traces (``torch.compiler.is_compiling()``), so
compiled graphs are unchanged. Hooks observe and return None: they never replace a value.
"""

from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING, Any, Callable

from trainguard.sanitize.frames import is_user_file, user_location
from trainguard.sanitize.state import BackwardCall, ForwardCall, LossCall

if TYPE_CHECKING:
    from trainguard.sanitize.watcher import Watcher

__all__ = ["install", "FUNCTIONAL_LOSSES", "FUNCTIONAL_WATCHED"]

FUNCTIONAL_LOSSES = (
    "cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
)
FUNCTIONAL_WATCHED = (
    "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
)

Undo = Callable[[], None]


def _patch(owner: Any, name: str, make: Callable[[Any], Any], undo: list[Undo]) -> None:
    original = getattr(owner, name)
    wrapper = make(original)
    functools.update_wrapper(wrapper, original)
    setattr(owner, name, wrapper)
    undo.append(lambda: setattr(owner, name, original))


def install(w: "Watcher") -> list[Undo]:
    """Install every hook and wrapper ``w``'s checks need; returns the undo actions."""
    import torch
    import torch.nn.functional as F
    from torch.nn.modules import module as module_mod
    from torch.nn.modules.loss import _Loss
    from torch.optim import optimizer as optim_mod

    is_compiling = torch.compiler.is_compiling
    is_grad_enabled = torch.is_grad_enabled
    module_file = module_mod.__file__
    state = w.state
    stack = state.stack
    undo: list[Undo] = []
    h = w.handlers

    def forward_pre(module: Any, args: tuple) -> None:
        if is_compiling():
            return None
        depth = len(stack)
        if depth == 0:
            caller = sys._getframe(1)
            while caller is not None and caller.f_code.co_filename == module_file:
                caller = caller.f_back
            call = ForwardCall(module, args, 0, module.training, is_grad_enabled(),
                               user_location(caller))
            call.direct = caller is not None and is_user_file(caller.f_code.co_filename)
        else:
            call = ForwardCall(module, args, depth, module.training, is_grad_enabled(), None)
        stack.append(call)
        if depth == 0:
            state.failed_call = None
        if h["on_forward_pre"]:
            w.emit("on_forward_pre", call)
        return None

    def forward_post(module: Any, args: tuple, output: Any) -> None:
        if is_compiling() or not stack:
            return None
        call = stack.pop()
        if call.module is not module:  # a call we did not see start (hooks installed mid-call)
            stack.append(call)
            return None
        call.output = output
        if sys.exc_info()[1] is not None and output is None:
            call.failed = True
            if state.failed_call is None:
                state.failed_call = call
        if h["on_forward"]:
            w.emit("on_forward", call)
        if call.failed:
            return None
        if isinstance(module, _Loss):
            if h["on_loss"]:
                where = call.where or user_location(sys._getframe(1))
                w.emit("on_loss", LossCall(type(module).__name__, args, {}, output, module, where))
        elif call.depth == 0:
            state.root_forwards += 1
            state.models.add(module)
            if h["on_root_forward"]:
                w.emit("on_root_forward", call)
        return None

    undo.append(module_mod.register_module_forward_pre_hook(forward_pre).remove)
    undo.append(module_mod.register_module_forward_hook(forward_post, always_call=True).remove)

    def step_pre(optimizer: Any, args: tuple, kwargs: dict) -> None:
        if is_compiling():
            return None
        state.in_step += 1
        state.optimizers.add(optimizer)
        if h["on_step_pre"]:
            w.emit("on_step_pre", optimizer)
        return None

    def step_post(optimizer: Any, args: tuple, kwargs: dict) -> None:
        if is_compiling():
            return None
        state.in_step = max(0, state.in_step - 1)
        state.step += 1
        if h["on_step"]:
            w.emit("on_step", optimizer)
        return None

    undo.append(optim_mod.register_optimizer_step_pre_hook(step_pre).remove)
    undo.append(optim_mod.register_optimizer_step_post_hook(step_post).remove)

    def make_backward(original: Any) -> Any:
        def backward(tensors: Any, grad_tensors: Any = None, retain_graph: Any = None,
                     create_graph: bool = False, *args: Any, **kwargs: Any) -> Any:
            if is_compiling():
                return original(tensors, grad_tensors, retain_graph, create_graph, *args, **kwargs)
            if isinstance(tensors, torch.Tensor):
                roots: tuple = (tensors,)
            elif isinstance(tensors, (list, tuple)):
                roots = tuple(t for t in tensors if isinstance(t, torch.Tensor))
            else:
                roots = ()
            retain = create_graph if retain_graph is None else bool(retain_graph)
            call = BackwardCall(roots, retain, bool(create_graph),
                                user_location(sys._getframe(1)), state.backward_count, state.step)
            if h["on_backward"]:
                w.emit("on_backward", call)
            state.in_backward += 1
            try:
                result = original(tensors, grad_tensors, retain_graph, create_graph,
                                  *args, **kwargs)
            except BaseException:
                call.tensors = ()
                state.backwards.append(call)
                raise
            finally:
                state.in_backward -= 1
            state.backward_count += 1
            if h["on_backward_done"]:
                w.emit("on_backward_done", call)
            call.tensors = ()  # keep no reference to the user's graph
            state.backwards.append(call)
            del state.backwards[:-8]
            return result
        return backward

    _patch(torch.autograd, "backward", make_backward, undo)

    if h["on_zero_grad"]:
        def make_zero_grad(original: Any) -> Any:
            def zero_grad(self: Any, set_to_none: bool = True) -> Any:
                if not is_compiling():
                    w.emit("on_zero_grad", self, bool(set_to_none))
                return original(self, set_to_none)
            return zero_grad
        _patch(torch.optim.Optimizer, "zero_grad", make_zero_grad, undo)
        _patch(torch.nn.Module, "zero_grad", make_zero_grad, undo)

    if h["on_save"]:
        _patch(torch, "save", lambda orig: _observer(w, "on_save", orig, 2), undo)
    if h["on_load"]:
        def make_load(original: Any) -> Any:
            def load(f: Any, *args: Any, **kwargs: Any) -> Any:
                w.emit("on_load", f, kwargs)
                return original(f, *args, **kwargs)
            return load
        _patch(torch, "load", make_load, undo)

    if h["on_loss"]:
        for name in FUNCTIONAL_LOSSES:
            _patch(F, name, lambda orig, name=name: _functional_loss(w, name, orig, _Loss), undo)
    if h["on_functional"]:
        for name in FUNCTIONAL_WATCHED:
            _patch(F, name, lambda orig, name=name: _functional(w, name, orig), undo)
    return undo


def _observer(w: "Watcher", event: str, original: Any, nargs: int) -> Any:
    def observed(*args: Any, **kwargs: Any) -> Any:
        w.emit(event, *args[:nargs])
        return original(*args, **kwargs)
    return observed


def _functional_loss(w: "Watcher", name: str, original: Any, loss_type: type) -> Any:
    import torch

    is_compiling = torch.compiler.is_compiling
    stack = w.state.stack

    def loss(*args: Any, **kwargs: Any) -> Any:
        output = original(*args, **kwargs)
        # A loss module calls this function itself; its own event covers it.
        if is_compiling() or (stack and isinstance(stack[-1].module, loss_type)):
            return output
        w.emit("on_loss", LossCall(name, args, kwargs, output, None,
                                   user_location(sys._getframe(1))))
        return output
    return loss


def _functional(w: "Watcher", name: str, original: Any) -> Any:
    import torch

    is_compiling = torch.compiler.is_compiling

    def observed(*args: Any, **kwargs: Any) -> Any:
        if not is_compiling():
            w.emit("on_functional", name, args, kwargs)
        return original(*args, **kwargs)
    return observed
