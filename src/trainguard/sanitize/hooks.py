"""The global hooks and narrow wrappers the watcher installs, each undone on exit.

- a wrapper of ``nn.Module.__call__``: outermost calls, loss modules and the module types a check
  asks for (``Check.module_types``) become events; any other inner call only updates the module
  stack and keeps PyTorch's hook-free fast path. (PyTorch's global module hooks,
  ``register_module_forward_pre_hook``/``register_module_forward_hook``, would send every module
  of every forward through ``Module._call_impl``'s slow path: about 10 us per module, 5-10% of a
  small training step, before any check runs.)
- optimizer step pre/post hooks (``torch.optim.optimizer.register_optimizer_step_pre_hook``/
  ``register_optimizer_step_post_hook``);
- wrappers of ``torch.no_grad``/``torch.enable_grad`` (open no-grad blocks are counted, so a
  forward with grad on inside one is known to be re-enabled), ``torch.autograd.backward`` (``Tensor.backward`` calls it),
  ``Optimizer.zero_grad``,
  ``Module.zero_grad``, ``torch.save``, ``torch.load`` and a few ``torch.nn.functional`` functions
  (losses and dropout), installed only when a check listens to them;
- the seeding calls, determinism flags and ``DataLoader.__iter__`` (``repro_hooks.py``), likewise.

No ``TorchFunctionMode`` or dispatch mode: those see every op and cost 1.1-2.5x a training step.
Every hook returns at once while ``torch.compile`` traces (``torch.compiler.is_dynamo_compiling()``,
which Dynamo folds to True, and ``is_compiling()`` where ``torch.export`` may trace too), so
compiled graphs are unchanged. Hooks observe and return None: they never replace a value.

Each call that can repeat every step also gives a key (``Cadence.see``, ``cadence.py``): once the
loop has settled, a call matching the settled cycle only updates the counters and skips the checks.
"""

from __future__ import annotations

import functools
import sys
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable

from trainguard.sanitize import frames
from trainguard.sanitize.bounds import Overrun
from trainguard.sanitize.cadence import BACKWARD, FORWARD
from trainguard.sanitize.frames import (frame_location, is_trainguard_file, is_user_code,
                                       is_user_file, user_frame, user_location)
from trainguard.sanitize.repro_hooks import install_loader_iter, install_repro
from trainguard.sanitize.state import (MADE, BackwardCall, ForwardCall, LossCall, Made,
                                       first_tensor)

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
_NO_INPUTS = object()  # the backward wrapper got other arguments: ``inputs`` is in its kwargs


class _CompilingFlag:
    """``_is_compiling_flag`` read through ``torch.compiler.is_compiling()`` (for a torch without
    the module attribute)."""

    @property
    def _is_compiling_flag(self) -> bool:
        import torch

        return torch.compiler.is_compiling()


def _compiling_flags() -> Any:
    """An object whose ``_is_compiling_flag`` attribute answers ``torch.compiler.is_compiling()``
    outside Dynamo's tracing: torch.compiler itself where it keeps that module attribute (read
    without a call on hot paths), else a stand-in that calls the function."""
    import torch

    if isinstance(getattr(torch.compiler, "_is_compiling_flag", None), bool):
        return torch.compiler
    return _CompilingFlag()


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
    from torch import nn
    from torch.nn.modules.loss import _Loss
    from torch.optim import optimizer as optim_mod

    is_dynamo_compiling = torch.compiler.is_dynamo_compiling
    # torch.compiler.is_compiling() without its call (True while torch.export traces): every
    # hook below has returned already when Dynamo traces, so the flag alone answers
    compiling = _compiling_flags()
    is_grad_enabled = torch.is_grad_enabled
    user_codes = frames._is_user_code  # id(code) -> bool, read directly on the settled path
    locations = frames._locations  # (id(code), f_lasti) -> location, likewise
    state = w.state
    seen_models = state.models
    seen_ids = seen_models._refs  # id -> weak reference; read directly on the settled path
    stack = state.stack
    modules = state.modules
    undo: list[Undo] = []
    h = w.handlers
    cadence = w.cadence
    see = cadence.see

    full_types = (_Loss, *w.module_types)
    original_call = nn.Module.__call__
    # ``Module.__call__`` is ``_wrapped_call_impl``: ``self._compiled_call_impl`` (set by
    # ``module.compile()``) when there is one, else ``self._call_impl``. Outside Dynamo's tracing the
    # wrapper makes that choice itself, so a call costs one Python frame less than through the
    # original (a torch whose ``__call__`` is something else gets the original every time).
    direct = original_call is getattr(nn.Module, "_wrapped_call_impl", None)

    def module_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if is_dynamo_compiling():
            # Traced by torch.compile (Dynamo folds the test to True, so it puts no guard on the
            # watcher's state): PyTorch's own call, as without the watcher.
            return original_call(self, *args, **kwargs)
        if modules and not isinstance(self, full_types):
            # An inner module no check asked about: straight to PyTorch's call (a failure is
            # located from the traceback by the outermost call).
            if kwargs or not direct or self._compiled_call_impl is not None:
                return original_call(self, *args, **kwargs)
            return self._call_impl(*args)  # (most calls: no keyword dict to rebuild)
        if compiling._is_compiling_flag:  # traced by torch.export
            return original_call(self, *args, **kwargs)
        try:
            depth = len(modules)
            model = False  # an outermost call of a model (not of a loss module)
            call: ForwardCall | None
            if depth == 0:
                caller = sys._getframe(1)
                grad = is_grad_enabled()
                if isinstance(self, _Loss):
                    # by type: a loss module built inside the loop is a new object every step
                    key: tuple = ("F", type(self), caller.f_code, caller.f_lasti, self.training,
                                  grad, state.no_grad_depth, state.in_backward, state.in_step,
                                  *_loss_sig(args, kwargs))
                else:
                    model = True
                    # the caller's own call site and the DataLoader iterated last too: a training
                    # step's function called from another line or on another loader (a
                    # validation pass through it) is not the settled cycle
                    back = caller.f_back
                    key = ("F", id(self), caller.f_code, caller.f_lasti,
                           back.f_code if back is not None else None,
                           back.f_lasti if back is not None else -1, state.loader_id,
                           self.training, grad, state.no_grad_depth, state.in_backward,
                           state.in_step)
                if see(key):
                    call = ForwardCall(self, args, 0, self.training, grad, user_location(caller))
                    call.kwargs = kwargs
                    call.direct = is_user_code(caller.f_code)
                    call.reenabled = state.no_grad_depth > 0 and grad
                else:
                    call = None  # a settled step: counters only
                state.failed_module = None
            elif isinstance(self, _Loss) and not see(("L", type(self), *_loss_sig(args, kwargs))):
                call = None
            else:
                call = ForwardCall(self, args, depth, self.training, is_grad_enabled(), None)
        except Exception as exc:
            w.hook_failed("nn.Module.__call__", exc)
            return original_call(self, *args, **kwargs)
        modules.append(self)
        if call is None:
            try:
                if direct and self._compiled_call_impl is None:  # (original_call, one frame less)
                    output = self._call_impl(*args, **kwargs)
                else:
                    output = original_call(self, *args, **kwargs)
            except BaseException as exc:
                if depth == 0:
                    state.failed_root = self
                    _locate_failure(state, exc, self, args)
                raise
            finally:
                modules.pop()
            if not model:  # a loss module
                return output
            state.root_forwards += 1
            if id(self) not in seen_ids:
                seen_models.add(self)
            code = caller.f_code  # (user_location's cached case, without the call)
            where = locations.get((id(code), caller.f_lasti)) if user_codes.get(id(code)) \
                else None
            if where is None:
                where = user_location(caller)
            if state.stamp_outputs and grad:  # stamped on settled steps too (TG201/202/203)
                stamp(self, output, where, args, kwargs)
            handlers = always["on_root_forward"]
            if handlers:
                # one record serves every settled call: the checks read it during the event only
                rec = settled
                rec.module, rec.args, rec.output = self, args, output
                rec.training, rec.grad_enabled, rec.where = self.training, grad, where
                for check, method in handlers:  # (Watcher.emit_always, inlined)
                    try:
                        method(rec)
                    except Exception as exc:
                        w._check_failed(check, "on_root_forward", exc)
                    except Overrun:  # (no deadline on settled calls: never, in practice)
                        w._overran(check, "on_root_forward", time.perf_counter())
                rec.module = rec.args = rec.output = None
            if cadence.level <= FORWARD and not state.in_step and not state.in_backward:
                forward_end(self, where)  # (an inference loop: its forward bounds the cycles)
            return output
        stack.append(call)
        if h["on_forward_pre"]:
            w.emit_module("on_forward_pre", call)  # never raises: a failing check becomes TG002
        try:
            output = original_call(self, *args, **kwargs)
        except BaseException as exc:
            try:
                call.failed = True
                if depth == 0:
                    state.failed_root = self
                    _locate_failure(state, exc, self, args)
                if h["on_forward"]:
                    w.emit_module("on_forward", call)
            except Exception as err:
                w.hook_failed("nn.Module.__call__", err)
            raise
        finally:
            modules.pop()
            stack.pop()
        try:
            _after_forward(call, output, depth, kwargs)
        except Exception as exc:
            w.hook_failed("nn.Module.__call__", exc)
        return output

    def forward_end(module: Any, where: Any) -> None:
        """A model's outermost call returned in a loop bounded by forwards (or by nothing yet)."""
        try:
            cadence.call_end(FORWARD, (id(module), where), w.reports, bool(w.armed))
        except Exception as exc:
            w.hook_failed("nn.Module.__call__", exc)

    stamps = state.stamps
    always = w.always  # event -> the checks' always handlers (lists are replaced, not the dict)
    settled = ForwardCall(None, (), 0, True, True, None)
    tensor_type = torch.Tensor

    ref = weakref.ref

    def input_refs(args: tuple) -> list[Any] | None:
        """Weak references to ``args``, or None when one is not a tensor (``Made.inputs``)."""
        refs = []  # (a plain loop: this runs on every step, settled ones too)
        for a in args:
            if not isinstance(a, tensor_type):
                return None
            refs.append(ref(a))
        return refs

    def call_refs(args: tuple, kwargs: dict) -> tuple[list[Any] | None, dict[str, Any] | None]:
        """``(Made.inputs, Made.kwargs)`` of a call, or ``(None, None)`` when it has an argument
        that would have to be kept alive."""
        inputs = input_refs(args)
        if inputs is None or not kwargs:
            return inputs, None
        named = keyword_refs(kwargs)
        return (inputs, named) if named is not None else (None, None)

    def keyword_refs(kwargs: dict) -> dict[str, Any] | None:
        """``Made.kwargs``: tensors as weak references, None, bools, numbers and strings as they
        are; None when another value would have to be kept alive."""
        out: dict[str, Any] = {}
        for key, value in kwargs.items():
            if isinstance(value, tensor_type):
                out[key] = ref(value)
            elif value is None or isinstance(value, (bool, int, float, str)):
                out[key] = value
            else:
                return None
        return out

    def stamp(module: Any, output: Any, where: Any, args: tuple, kwargs: dict) -> Made | None:
        """Stamp the ``grad_fn`` of an outermost output (``State.stamps`` follows it)."""
        made = None
        if isinstance(output, tensor_type):  # (most models: one tensor, no list to build)
            node = output.grad_fn
            if node is None:
                return None
            inputs = named = None
            if state.stamp_inputs:
                if not kwargs and len(args) == 1 and isinstance(args[0], tensor_type):
                    inputs = [ref(args[0])]  # (the usual call: no call, no loop)
                else:
                    inputs, named = call_refs(args, kwargs)
            made = Made(state.backward_count, state.step, where, type(module).__name__,
                        state.root_forwards, id(module), inputs,
                        ref(output) if inputs is not None else None, named)
            node.metadata[MADE] = made
        else:
            for tensor in first_tensor(output):
                node = tensor.grad_fn
                if node is not None:
                    if made is None:
                        inputs, named = call_refs(args, kwargs) if state.stamp_inputs \
                            else (None, None)
                        made = Made(state.backward_count, state.step, where,
                                    type(module).__name__, state.root_forwards, id(module),
                                    inputs, None, named)
                    node.metadata[MADE] = made
            if made is not None and made.inputs is not None:
                # only the first few tensors of a tuple or dict are stamped: what TG405 needs to
                # re-run this call when a loss comes from another one (no reference to the stamp,
                # which must die with the graph)
                state.last_multi = (made.order, made.model_id, made.module, made.where, made.inputs,
                                    made.kwargs)
        if made is not None and not state.in_backward:
            stamps.append(ref(made))
            if len(stamps) > 2048:  # no check reads them (TG201 switched off): keep the newest
                del stamps[:-1024]
        return made

    def _after_forward(call: ForwardCall, output: Any, depth: int, kwargs: dict) -> None:
        self = call.module
        call.output = output
        if h["on_forward"]:
            w.emit_module("on_forward", call)
        if isinstance(self, _Loss):
            if h["on_loss"]:
                where = call.where or user_location(sys._getframe(2))
                w.emit("on_loss", LossCall(type(self).__name__, call.args, kwargs, output, self,
                                           where))
        elif depth == 0:
            state.root_forwards += 1
            state.models.add(self)
            if state.stamp_outputs and call.grad_enabled:
                call.made = stamp(self, output, call.where, call.args, kwargs)
            if h["on_root_forward"]:
                w.emit("on_root_forward", call)
            if cadence.level <= FORWARD and not state.in_step and not state.in_backward:
                forward_end(self, call.where)

    _patch(nn.Module, "__call__", lambda orig: module_call, undo)

    # Optimizer steps, backward and zero_grad are never traced by torch.export, so Dynamo's own
    # test (one call, folded to True while Dynamo traces) is enough for them.
    stepped_ids = state.optimizers._refs

    def step_pre(optimizer: Any, args: tuple, kwargs: dict) -> None:
        if is_dynamo_compiling():
            return None
        try:
            state.in_step += 1
            if id(optimizer) not in stepped_ids:
                state.optimizers.add(optimizer)
            if see(("S", id(optimizer))) and h["on_step_pre"]:
                w.emit("on_step_pre", optimizer)
        except Exception as exc:
            w.hook_failed("Optimizer.step", exc)
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
                    w.emit("on_step", optimizer)
            else:
                for check, method in always["on_step"]:  # (Watcher.emit_always, inlined)
                    try:
                        method(optimizer)
                    except Exception as exc:
                        w._check_failed(check, "on_step", exc)
                    except Overrun:  # (no deadline on settled calls: never, in practice)
                        w._overran(check, "on_step", time.perf_counter())
            cadence.boundary(optimizer, w.reports, bool(w.armed))
        except Exception as exc:
            w.hook_failed("Optimizer.step", exc)
        return None

    undo.append(optim_mod.register_optimizer_step_pre_hook(step_pre).remove)
    undo.append(optim_mod.register_optimizer_step_post_hook(step_post).remove)

    backwards = state.backwards
    tensor_backward = torch.Tensor.backward.__code__

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
                return call_original(original, tensors, grad_tensors, retain_graph, create_graph,
                                     inputs, args, kwargs)
            try:
                if isinstance(tensors, torch.Tensor):
                    roots: tuple = (tensors,)
                elif isinstance(tensors, (list, tuple)):
                    roots = tuple(t for t in tensors if isinstance(t, torch.Tensor))
                else:
                    roots = ()
                retain = create_graph if retain_graph is None else bool(retain_graph)
                # the innermost user frame: Tensor.backward's caller, usually (found without
                # user_frame's call when that caller is user code seen before)
                caller = sys._getframe(1)
                if caller.f_code is tensor_backward:
                    caller = caller.f_back
                if caller is not None and not user_codes.get(id(caller.f_code)):
                    caller = user_frame(caller)
                if caller is None:
                    checked = see(("B", None, -1, retain, bool(create_graph), len(roots)))
                    where = None
                else:
                    code, lasti = caller.f_code, caller.f_lasti
                    checked = see(("B", code, lasti, retain, bool(create_graph), len(roots)))
                    where = locations.get((id(code), lasti)) or frame_location(caller)
                # the end of this backward may bound the cycles of a loop without an optimizer
                bounds = cadence.level <= BACKWARD and not state.in_step
                call = BackwardCall(roots, retain, bool(create_graph), where,
                                    state.backward_count, state.step)
                if checked:
                    if h["on_backward"]:
                        w.emit("on_backward", call)
                else:
                    for check, method in always["on_backward"]:  # (Watcher.emit_always)
                        try:
                            method(call)
                        except Exception as exc:
                            w._check_failed(check, "on_backward", exc)
                        except Overrun:  # (no deadline on settled calls: never, in practice)
                            w._overran(check, "on_backward", time.perf_counter())
            except Exception as exc:
                w.hook_failed("torch.autograd.backward", exc)
                return call_original(original, tensors, grad_tensors, retain_graph, create_graph,
                                     inputs, args, kwargs)
            state.in_backward += 1
            try:
                result = call_original(original, tensors, grad_tensors, retain_graph,
                                       create_graph, inputs, args, kwargs)
            except BaseException as exc:
                try:
                    call.failed = True
                    if h["on_backward_failed"]:
                        w.emit("on_backward_failed", call, exc)
                    call.tensors = ()
                    backwards.append(call)
                except Exception as err:
                    w.hook_failed("torch.autograd.backward", err)
                raise
            finally:
                state.in_backward -= 1
            try:
                state.backward_count += 1
                if checked and h["on_backward_done"]:
                    w.emit("on_backward_done", call)
                call.tensors = ()  # keep no reference to the user's graph
                backwards.append(call)
                if bounds:
                    cadence.call_end(BACKWARD, where, w.reports, bool(w.armed))
            except Exception as exc:
                w.hook_failed("torch.autograd.backward", exc)
            return result
        return backward

    def call_original(original: Any, tensors: Any, grad_tensors: Any, retain_graph: Any,
                      create_graph: Any, inputs: Any, args: tuple, kwargs: dict) -> Any:
        """``original`` with the backward wrapper's arguments (``inputs`` by name, or, when the
        wrapper got other arguments, ``_NO_INPUTS`` and everything in ``args``/``kwargs``)."""
        if inputs is _NO_INPUTS:
            return original(tensors, grad_tensors, retain_graph, create_graph, *args, **kwargs)
        return original(tensors, grad_tensors, retain_graph, create_graph, inputs=inputs)

    _patch(torch.autograd, "backward", make_backward, undo)

    _install_grad_mode(w, undo)
    _install_mode_calls(w, undo)
    _install_parameter_registration(w, undo)

    if h["on_zero_grad"]:
        def make_zero_grad(original: Any) -> Any:
            def zero_grad(self: Any, set_to_none: bool = True) -> Any:
                if not is_dynamo_compiling():
                    try:
                        caller = sys._getframe(1)
                        if see(("Z", id(self), bool(set_to_none), caller.f_code, caller.f_lasti)):
                            w.emit("on_zero_grad", self, bool(set_to_none))
                    except Exception as exc:
                        w.hook_failed("zero_grad", exc)
                return original(self, set_to_none)
            return zero_grad
        _patch(torch.optim.Optimizer, "zero_grad", make_zero_grad, undo)
        _patch(torch.nn.Module, "zero_grad", make_zero_grad, undo)

    if h["on_save"]:
        _patch(torch, "save", lambda orig: _observer(w, "on_save", orig, 2), undo)
    if h["on_load"]:
        def make_load(original: Any) -> Any:
            def load(f: Any, *args: Any, **kwargs: Any) -> Any:
                w.emit("on_load", f, kwargs)  # emit never raises: a failing check becomes TG002
                return original(f, *args, **kwargs)
            return load
        _patch(torch, "load", make_load, undo)

    if h["on_loss"]:
        for name in FUNCTIONAL_LOSSES:
            _patch(F, name, lambda orig, name=name: _functional_loss(w, name, orig, _Loss), undo)
    if h["on_functional"]:
        for name in FUNCTIONAL_WATCHED:
            _patch(F, name, lambda orig, name=name: _functional(w, name, orig), undo)
    if h["on_scheduler_step"]:
        _patch_schedulers(w, undo)
    if h["on_sampler_iter"]:
        from torch.utils.data.distributed import DistributedSampler

        def make_sampler_iter(original: Any) -> Any:
            def __iter__(self: Any) -> Any:
                w.emit("on_sampler_iter", self)
                return original(self)
            return __iter__
        _patch(DistributedSampler, "__iter__", make_sampler_iter, undo)
    if h["on_clip"]:
        for name in ("clip_grad_norm_", "clip_grad_value_"):
            _patch(torch.nn.utils, name, lambda orig, name=name: _clip(w, name, orig), undo)
    _install_warning_location(undo)
    # Seeding calls, determinism flags and DataLoader passes (TG501-TG503): repro_hooks.py.
    if h["on_repro_pre"] or h["on_repro"]:
        install_repro(w, undo)
    if h["on_loader_iter"]:
        install_loader_iter(w, undo)
    return undo


def _install_warning_location(undo: list[Undo]) -> None:
    """Show PyTorch's warnings at the user's line, as without the watcher.

    A warning issued with ``stacklevel=2`` inside a wrapped function (``F.mse_loss``'s size warning,
    the scheduler-before-optimizer warning of ``LRScheduler.step``) names its caller, which is now
    the wrapper. ``warnings.showwarning`` (called only for a warning that is shown) is wrapped to
    put the innermost user frame in its place. Warnings recorded by ``catch_warnings(record=True)``
    still carry the wrapper's line."""
    import warnings

    original = warnings.showwarning

    def showwarning(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
                    line: Any = None) -> None:
        try:
            if is_trainguard_file(filename):
                frame = user_frame(sys._getframe(1))
                if frame is not None:
                    filename, lineno, line = frame.f_code.co_filename, frame.f_lineno, None
        except Exception:  # never in the way of the warning itself
            pass
        return original(message, category, filename, lineno, file, line)

    warnings.showwarning = showwarning

    def restore() -> None:
        if warnings.showwarning is showwarning:  # left alone when something replaced it since
            warnings.showwarning = original
    undo.append(restore)


def _locate_failure(state: Any, exc: BaseException, root: Any, args: tuple) -> None:
    """Set ``state.failed_module``/``failed_inputs`` to the innermost module whose call the
    exception passed through, read from its traceback (``Module._call_impl`` frames hold the
    module as ``self`` and its positional inputs as ``args``). Never raises."""
    try:
        from torch import nn

        impl = (nn.Module._call_impl.__code__, nn.Module._wrapped_call_impl.__code__)
        module, inputs = root, args
        tb = exc.__traceback__
        while tb is not None:
            frame = tb.tb_frame
            if frame.f_code in impl:
                found = frame.f_locals.get("self")
                if isinstance(found, nn.Module):
                    module, inputs = found, frame.f_locals.get("args", ())
            tb = tb.tb_next
        state.failed_module = module
        state.failed_inputs = _inputs(inputs if isinstance(inputs, tuple) else ())
    except Exception:  # a diagnosis aid only: never in the way of the user's error
        state.failed_module, state.failed_inputs = root, []


def _loss_sig(args: tuple, kwargs: dict) -> tuple:
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


def _inputs(args: tuple) -> list[tuple[tuple[int, ...], str]]:
    """``(shape, device)`` of the tensor arguments of a call that raised."""
    import torch

    return [(tuple(a.shape), str(a.device)) for a in args if isinstance(a, torch.Tensor)]


def _install_mode_calls(w: "Watcher", undo: list[Undo]) -> None:
    """Note where user code puts a module in eval mode (``State.eval_at``), for the messages of
    the mode checks. Only the outermost ``train``/``eval`` call counts (``Module.train`` calls
    itself on every child); a run calls them per epoch, not per step."""
    from torch import nn

    eval_at = w.state.eval_at
    depth = [0]  # nn.Module.train calls in progress (it recurses into children)

    def make_train(original: Any) -> Any:
        def train(self: Any, mode: bool = True) -> Any:
            if depth[0] == 0:
                try:
                    if mode:
                        eval_at.pop(id(self), None)
                        caller = _mode_caller(sys._getframe(1))
                        if not self.training and is_user_code(caller.f_code):
                            # user code put an eval-mode module back in training mode (TG101);
                            # was it a library's evaluation loop that had put it in eval mode?
                            by_library = w.state.library_eval is not None \
                                and w.state.library_eval() is self
                            w.state.train_at = (weakref.ref(self), frame_location(caller),
                                                w.state.backward_count, by_library)
                    else:
                        eval_at[id(self)] = (weakref.ref(self), user_location(sys._getframe(1)))
                        library = not is_user_code(_mode_caller(sys._getframe(1)).f_code)
                        w.state.library_eval = weakref.ref(self) if library else None
                        if len(eval_at) > 256:  # modules put in eval mode and dropped
                            for key in [k for k, (ref, _) in eval_at.items() if ref() is None]:
                                del eval_at[key]
                except Exception as exc:
                    w.hook_failed("nn.Module.train", exc)
            depth[0] += 1
            try:
                return original(self, mode)
            finally:
                depth[0] -= 1
        return train

    _patch(nn.Module, "train", make_train, undo)


def _mode_caller(frame: Any) -> Any:
    """The frame that called ``train()``/``eval()``, past overrides that call ``super()``'s
    (``transformers.PreTrainedModel.train``)."""
    while frame.f_code.co_name in ("train", "eval") and frame.f_back is not None:
        frame = frame.f_back
    return frame


def _install_parameter_registration(w: "Watcher", undo: list[Undo]) -> None:
    """Note the user's line that adds parameters to a module already built (``State.added_at``),
    for TG304: a parameter or a submodule assigned outside every module's ``__init__`` (a head
    assigned after the optimizer was built, ``model[2] = nn.Linear(...)``, a parameter created in
    a training hook). PyTorch's global registration hooks run once per assignment, not per step.
    """
    from torch import nn
    from torch.nn.modules.module import (register_module_module_registration_hook,
                                         register_module_parameter_registration_hook)

    added_at = w.state.added_at

    def site(start: Any) -> Any:
        """The user's frame that made the assignment, or None while a module is being built (an
        ``__init__`` of a module on the way up: ``nn.Linear(...)``, ``DDP(model)``, a model's
        own layers, weights tied in ``post_init``)."""
        frame = start
        for _ in range(FRAMES_TO_USER):
            if frame is None:
                return None
            code = frame.f_code
            if code.co_name == "__init__" and isinstance(frame.f_locals.get("self"), nn.Module):
                return None
            if is_user_code(code):
                return frame
            frame = frame.f_back
        return None

    def note(params: Any, start: Any, what: str) -> None:
        try:
            frame = site(start)
            if frame is None:
                return
            where = frame_location(frame)
            for param in params:
                if param is not None:
                    added_at[id(param)] = (weakref.ref(param), where)
            if len(added_at) > 4096:
                for key in [k for k, (ref, _) in added_at.items() if ref() is None]:
                    del added_at[key]
        except Exception as exc:
            w.hook_failed(what, exc)

    undo.append(register_module_parameter_registration_hook(
        lambda module, name, param: note((param,), sys._getframe(1), "parameter registration")
    ).remove)
    undo.append(register_module_module_registration_hook(
        lambda module, name, sub: note(sub.parameters() if sub is not None else (),
                                       sys._getframe(1), "submodule registration")
    ).remove)


FRAMES_TO_USER = 12  # frames from a registration hook up to the user's assignment, at most


def _install_grad_mode(w: "Watcher", undo: list[Undo]) -> None:
    """Count open ``torch.no_grad()`` blocks, and note where user code enters ``enable_grad`` with
    grad mode off. ``torch.set_grad_enabled`` is left alone: every ``optimizer.step()`` calls it
    twice, and a forward with grad on inside an open ``no_grad`` block is re-enabled either way."""
    import torch
    from torch.autograd import grad_mode

    state = w.state
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
                if not was and is_user_code(frame.f_code):
                    state.enable_grad_at.append(user_location(frame))
                else:
                    state.enable_grad_at.append(None)
            except Exception as exc:
                w.hook_failed("torch.enable_grad", exc)
            return result
        return __enter__

    def make_enable_exit(original: Any) -> Any:
        def __exit__(self: Any, *exc: Any) -> Any:
            if state.enable_grad_at:
                state.enable_grad_at.pop()
            return original(self, *exc)
        return __exit__

    _patch(grad_mode.no_grad, "__enter__", make_no_grad_enter, undo)
    _patch(grad_mode.no_grad, "__exit__", make_no_grad_exit, undo)
    _patch(grad_mode.enable_grad, "__enter__", make_enable_enter, undo)
    _patch(grad_mode.enable_grad, "__exit__", make_enable_exit, undo)


def _clip(w: "Watcher", name: str, original: Any) -> Any:
    """Observe a gradient-clipping call; a generator of parameters is read once into a list, which
    is what the original then receives (it accepts any iterable)."""
    import torch

    is_compiling = torch.compiler.is_compiling

    see = w.cadence.see

    def clip(parameters: Any, *args: Any, **kwargs: Any) -> Any:
        if is_compiling():
            return original(parameters, *args, **kwargs)
        caller = sys._getframe(1)
        if not see(("C", name, caller.f_code, caller.f_lasti)):
            return original(parameters, *args, **kwargs)
        params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
        w.emit("on_clip", name, params)  # emit never raises: a failing check becomes TG002
        return original(params, *args, **kwargs)
    return clip


def _patch_schedulers(w: "Watcher", undo: list[Undo]) -> None:
    """Wrap ``step`` of ``LRScheduler`` and of every scheduler class that overrides it.

    Only calls made by user code become events: the ``step()`` a scheduler's constructor makes and
    the steps ``SequentialLR``/``ChainedScheduler`` give their children are not.
    """
    import torch
    from torch.optim import lr_scheduler as lrs

    is_compiling = torch.compiler.is_compiling
    classes = [c for c in vars(lrs).values() if isinstance(c, type)
               and issubclass(c, lrs.LRScheduler) and "step" in c.__dict__]
    depth = [0]
    see = w.cadence.see

    def make(original: Any) -> Any:
        def step(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                caller = sys._getframe(1)
                if (depth[0] == 0 and not is_compiling()
                        and is_user_file(caller.f_code.co_filename)
                        and see(("R", id(self), caller.f_code, caller.f_lasti))):
                    w.emit("on_scheduler_step", self)
            except Exception as exc:
                w.hook_failed("LRScheduler.step", exc)
            depth[0] += 1
            try:
                return original(self, *args, **kwargs)
            finally:
                depth[0] -= 1
        return step

    for cls in classes:
        _patch(cls, "step", make, undo)


def _observer(w: "Watcher", event: str, original: Any, nargs: int) -> Any:
    def observed(*args: Any, **kwargs: Any) -> Any:
        w.emit(event, *args[:nargs])
        return original(*args, **kwargs)
    return observed


def _functional_loss(w: "Watcher", name: str, original: Any, loss_type: type) -> Any:
    import torch

    # torch.compiler.is_compiling(), one call cheaper: Dynamo folds the first test to True
    is_dynamo_compiling = torch.compiler.is_dynamo_compiling
    compiling = _compiling_flags()
    modules = w.state.modules
    see = w.cadence.see

    def loss(*args: Any, **kwargs: Any) -> Any:
        output = original(*args, **kwargs)
        # A loss module calls this function itself; its own event covers it.
        if is_dynamo_compiling() or compiling._is_compiling_flag or (
                modules and isinstance(modules[-1], loss_type)):
            return output
        try:
            caller = sys._getframe(1)
            if not see(("L", name, caller.f_code, caller.f_lasti, _loss_sig(args, kwargs))):
                return output
            call = LossCall(name, args, kwargs, output, None, None, caller)
            w.emit("on_loss", call)
            call._frame = None
        except Exception as exc:
            w.hook_failed(f"F.{name}", exc)
        return output
    return loss


def _functional(w: "Watcher", name: str, original: Any) -> Any:
    import torch

    is_compiling = torch.compiler.is_compiling

    state = w.state
    see = w.cadence.see

    def observed(*args: Any, **kwargs: Any) -> Any:
        if not is_compiling():
            caller = sys._getframe(1)
            if not see(("D", name, caller.f_code, caller.f_lasti)):
                return original(*args, **kwargs)
            state.functional_caller = caller
            try:
                w.emit("on_functional", name, args, kwargs)
            finally:
                state.functional_caller = None
        return original(*args, **kwargs)
    return observed
