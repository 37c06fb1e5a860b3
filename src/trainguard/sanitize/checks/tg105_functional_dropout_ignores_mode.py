"""TG105 functional-dropout-ignores-mode: functional dropout inside ``forward`` keeps dropping in
eval mode.

What it watches: calls of ``F.dropout``, ``F.dropout1d/2d/3d``, ``F.alpha_dropout``,
``F.feature_alpha_dropout``, ``torch.dropout`` (and ``torch.feature_dropout``,
``torch.alpha_dropout``, ``torch.feature_alpha_dropout``) and ``F.scaled_dot_product_attention``
(narrow wrappers; nothing else is intercepted). ``nn.Dropout`` passes ``training=self.training``
itself and costs one argument check; ``nn.MultiheadAttention`` passes ``dropout_p=0`` in eval mode.

When it fires: the module whose ``forward`` (or a method or helper it calls, 4 frames at most)
makes the call is in eval mode, the probability is above 0, and dropout is on whatever the mode:

- ``F.dropout`` and its siblings with ``training`` left at its default (True), or given by
  position as the literal ``True`` (an argument list copied with its default; read from the
  call's source once per call site);
- ``torch.dropout(x, p, True)`` and its siblings, whose ``train`` flag is required, given as the
  literal ``True`` (by position or by name);
- ``F.scaled_dot_product_attention(q, k, v, dropout_p=p)`` with ``p > 0``: it applies dropout to
  the attention weights whatever the module's mode (pytorch/pytorch#124464); the module must pass
  ``dropout_p=self.p if self.training else 0.0``;
- an ``nn.Dropout`` in training mode called by a module in eval mode that does not hold it: built
  inside ``forward`` (``nn.Dropout(p=0.5)(x)``, yangze0930/NTS-Net#14), a new module on every
  call that ``model.eval()`` never reaches.

Dropout stays on after ``model.eval()``, so evaluation is random. Reported at the call's line
(for ``scaled_dot_product_attention``, at its ``dropout_p=`` argument, the part to change).

A flag that is a helper's parameter left at its default True by the call that reached the
helper (``def attend(q, k, v, p, train=True)`` passing ``training=train``, ``forward`` calling
``attend(q, k, v, self.p)``: NVIDIA/apex#1449) is that default: reported at the call that left
it out (followed through 3 helpers that pass their own parameter on).

An explicit ``training=True`` by name fires only in the forward of the outermost module of the
call (the model being evaluated itself, in eval mode: Coderx7/SimpleNet#2) when no input is
given to it twice (no Monte Carlo pass): reported at the end of the run.

Silent on: ``training=self.training`` (any flag that follows the mode: False in eval mode); an
explicit ``training=True`` by name in a sub-module (a stated choice: Tacotron 2's pre-net keeps
dropout on at inference; a sub-module of a model the run called, also when the model's own method
reaches it outermost, NVIDIA/tacotron2#324) or in a model sampled repeatedly on the same input
(Monte Carlo dropout: the tensor the model was called with decides, not the dropout's own input,
which an earlier dropout of the pass made random); ``p == 0``; calls in training mode (MC dropout
with the model kept in training mode); calls outside any module (the mode is unknown).

Cost: per checked call in eval mode with ``p > 0``, 4 frames looked at for the calling module;
for a positional or required ``True`` flag, one parse of the caller's file per call site
(``bounds.parse_file``: cached).

Reference: ``torch.nn.functional.dropout`` docs ("training: apply dropout if True. Default: True")
(https://pytorch.org/docs/stable/generated/torch.nn.functional.dropout.html); GitHub
pytorch/pytorch#26338 ("Behavior of F.dropout in eval mode"), Coderx7/SimpleNet#2, and
pytorch/pytorch#124464 (``scaled_dot_product_attention`` applies dropout in eval mode).
"""

from __future__ import annotations

import ast
import sys
from typing import Any

from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.frames import (frame_location, is_user_code, user_frame,
                                            user_location)
from trainguard.sanitize.core.source import SourceFile, function_node

_SDPA = "scaled_dot_product_attention"


def _module_frame(frame: Any, *, depth: int = 4) -> tuple[Any, Any]:
    """``(module, frame)``: the first ``self`` that is an ``nn.Module`` within ``depth`` frames
    from ``frame`` (the module whose method made the call), and its frame; ``(None, None)``."""
    from torch import nn

    while frame is not None and depth > 0:
        found = frame.f_locals.get("self")
        if isinstance(found, nn.Module):
            return found, frame
        frame, depth = frame.f_back, depth - 1
    return None, None


def _calling_module(frame: Any, *, depth: int = 4) -> Any:
    """The module whose method (``forward`` or a helper it calls) made the call, else None."""
    return _module_frame(frame, depth=depth)[0]


def _stray_owner(drop: Any, frame: Any) -> Any:
    """The module in eval mode that called ``drop`` (an ``nn.Dropout`` in training mode, whose
    call runs at ``frame``) without holding it: a dropout built inside ``forward``
    (``nn.Dropout(0.5)(x)``), a new module on every call that ``model.eval()`` never reaches.
    None otherwise."""
    from torch.nn.modules.dropout import _DropoutNd

    while frame is not None and frame.f_locals.get("self") is drop:
        frame = frame.f_back  # (the dropout's own call frames)
    owner = _calling_module(frame)
    if owner is None or owner.training or isinstance(owner, _DropoutNd) or \
            any(m is drop for m in owner.modules()):
        return None
    return owner


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _model_input(module: Any, frame: Any) -> Any:
    """The first tensor ``module`` was called with (``x = F.dropout(x)`` rebinds forward's x)."""
    f, depth = frame.f_back, 6
    while f is not None and depth > 0:
        local = f.f_locals
        if local.get("self") is module and isinstance(local.get("args"), tuple):
            kwargs = local.get("kwargs")
            given = [*local["args"], *(kwargs.values() if isinstance(kwargs, dict) else ())]
            return next((g for g in given if _is_tensor(g)), None)
        f, depth = f.f_back, depth - 1
    names = frame.f_code.co_varnames  # (forward called directly: its first parameter now)
    return frame.f_locals.get(names[1]) if frame.f_code.co_argcount > 1 else None


def _flag_source(frame: Any, index: int, keyword: str) -> Any:
    """The expression the call the user's ``frame`` is making gives as its ``index``-th
    positional argument or as ``keyword`` (by its source), else None."""
    if frame is None or not is_user_code(frame.f_code):
        return None
    path, line, col = frame_location(frame)
    file = SourceFile.load(path)
    node = file.call_at(line, col - 1) if file is not None else None
    if node is None or any(isinstance(a, ast.Starred) for a in node.args):
        return None
    return node.args[index] if len(node.args) > index else next(
        (k.value for k in node.keywords if k.arg == keyword), None)


def _literal_true(frame: Any, index: int, keyword: str) -> bool:
    """Whether the call the user's ``frame`` is making passes the literal ``True`` as its
    ``index``-th positional argument or as ``keyword`` (by its source)."""
    given = _flag_source(frame, index, keyword)
    return isinstance(given, ast.Constant) and given.value is True


def _parameter_index(func: Any, name: str) -> Any:
    """``(position, default)`` of the parameter ``name`` of the function node ``func`` (the
    position None for a keyword-only one), else None; a body that rebinds it: None."""
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) or any(
            isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
            for n in ast.walk(func)):
        return None
    a = func.args
    positional = [*a.posonlyargs, *a.args]
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for i, arg in enumerate(positional):
        if arg.arg == name:
            return i, defaults[i]
    for arg, default in zip(a.kwonlyargs, a.kw_defaults):
        if arg.arg == name:
            return None, default
    return None


def _defaulted_flag(frame: Any, index: int, keyword: str) -> Any:
    """Where a dropout flag that is True comes from a helper's parameter whose default is True
    and a call left it out: ``def attend(q, k, v, p, train=True)`` calling
    ``F.dropout(w, p, training=train)``, and ``forward`` calling ``attend(q, k, v, self.p)``.
    Followed through helpers that pass their own parameter on (3 calls at most). Returns
    ``(location of the call that left it out, function name, parameter)``, else None."""
    given = _flag_source(frame, index, keyword)
    for _ in range(3):
        if not isinstance(given, ast.Name):
            return None  # (a literal True is a stated choice; anything else is computed)
        name, func = given.id, function_node(frame.f_code)
        found = _parameter_index(func, name)
        caller = frame.f_back
        if found is None or caller is None or not is_user_code(caller.f_code):
            return None
        path, line, col = frame_location(caller)
        file = SourceFile.load(path)
        call = file.call_at(line, col - 1) if file is not None else None
        if call is None or any(isinstance(a, ast.Starred) for a in call.args) or any(
                k.arg is None for k in call.keywords):
            return None  # (``*args``/``**kwargs``: what was passed is unknown)
        position, default = found
        if position is not None and isinstance(call.func, ast.Attribute) and \
                func.args.args and func.args.args[0].arg in ("self", "cls"):
            position -= 1  # (a method: its receiver is not in the call's arguments)
        given = next((k.value for k in call.keywords if k.arg == name), None)
        if given is None and position is not None and 0 <= position < len(call.args):
            given = call.args[position]
        if given is None:
            if isinstance(default, ast.Constant) and default.value is True:
                return (path, line, col), func.name, name
            return None
        frame = caller
    return None


def _keyword_location(keyword: str) -> Any:
    """``(path, line, col)`` of ``keyword=`` in the call the user's innermost frame is making
    (``dropout_p=self.dropout`` on its own line of a call written over several lines: the line
    to change), else None (the call's own line is then used)."""
    frame = user_frame(sys._getframe(1))
    if frame is None:
        return None
    path, line, col = frame_location(frame)
    file = SourceFile.load(path)
    node = file.call_at(line, col - 1) if file is not None else None
    given = next((k for k in node.keywords if k.arg == keyword), None) if node else None
    return (path, given.value.lineno, given.value.col_offset + 1) if given is not None else None


class FunctionalDropoutIgnoresMode(Check):
    code = "TG105"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.literal: dict[tuple, bool] = {}  # (code, instruction) -> the flag is a literal True
        self.passes: dict[Any, set] = {}  # a stated training=True's line -> inputs it was given
        self.held: dict[int, bool] = {}  # id(module) -> a sub-module of another model called
        self.sampled: set[Any] = set()  # lines of Monte Carlo passes
        self.pending: dict[Any, tuple] = {}  # line -> (owner, function, p), reported at exit
        self.defaults: dict[tuple, Any] = {}  # frames -> a helper's flag left at True, or None

    def on_functional(self, name: str, args: tuple, kwargs: dict) -> None:
        if not self.state.modules and _calling_module(self.state.functional_caller) is None:
            return  # outside any module (``self.forward(x)`` called directly is inside one)
        if name == _SDPA:
            p = args[4] if len(args) > 4 else kwargs.get("dropout_p", 0.0)
            module = self._eval_module(p)
            if module is not None:
                self._report_attention(module, p)
            return
        if name.startswith("torch."):
            flag = args[2] if len(args) > 2 else kwargs.get("train")
            p = args[1] if len(args) > 1 else kwargs.get("p")
            how = "passes the literal train=True"
            positional = False
        else:
            if "training" in kwargs:  # stated: training=self.training, or True on purpose,
                if kwargs["training"] is True:  # unless the model that says so is evaluated
                    p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
                    module = self._eval_module(p)
                    if module is None or not self._defaulted(name, module, p):
                        self._stated(name, p)
                return
            flag = args[2] if len(args) > 2 else True
            p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
            positional = len(args) > 2
            how = ("passes training=True by position" if positional
                   else "uses its default training=True")
        if flag is not True:
            return
        if positional and p and not name.startswith("torch."):
            from torch.nn.modules.dropout import _DropoutNd

            drop, frame = _module_frame(self.state.functional_caller, depth=6)
            if isinstance(drop, _DropoutNd) and drop.training:
                # an nn.Dropout's own call (training=self.training): in training mode it is in
                # fault only when a module in eval mode calls it without holding it
                owner = _stray_owner(drop, frame)
                if owner is None:
                    return
                kind, cls = type(drop).__name__, type(owner).__name__
                self.report(
                    f"{kind}(p={drop.p}) is built inside {cls}.forward: a new module on every "
                    f"call, in training mode, that {cls} does not hold, so model.eval() never "
                    f"reaches it and dropout still drops activations while {cls} is in eval mode",
                    fix=f"build it once in {cls}.__init__ (self.dropout = nn.{kind}(p={drop.p})) "
                        f"and call self.dropout(x)")
                return
        module = self._eval_module(p)
        if module is None:
            return
        if (name.startswith("torch.") or positional) and not self._is_literal(name):
            self._defaulted(name, module, p)  # a helper's flag left at True, else computed at
            return  # run time (an MC-dropout switch)
        owner = type(module).__name__
        call = name if name.startswith("torch.") else f"F.{name}"
        flag = "train" if name.startswith("torch.") else "training"
        self.report(
            f"{call}(..., p={p}) in {owner}.forward {how} while {owner} is in eval mode: "
            "dropout still drops activations after model.eval()",
            fix=f"pass {flag}=self.training ({call}(x, p, {flag}=self.training)) or use an "
                "nn.Dropout module")

    def _defaulted(self, name: str, module: Any, p: Any) -> bool:
        """The flag is a helper's parameter left at its default True by a call (see
        :func:`_defaulted_flag`): reported at that call, the line that can pass the mode."""
        frame = self.state.functional_caller
        key, f = [], frame
        for _ in range(4):
            if f is None:
                break
            key.append((id(f.f_code), f.f_lasti))
            f = f.f_back
        if tuple(key) not in self.defaults:
            if len(self.defaults) > 1024:
                self.defaults.clear()
            torch_op = name.startswith("torch.")
            self.defaults[tuple(key)] = _defaulted_flag(frame, 2, "train" if torch_op
                                                        else "training")
        found = self.defaults[tuple(key)]
        if found is None:
            return False
        where, helper, param = found
        owner = type(module).__name__
        call, flag = (name, "train") if name.startswith("torch.") else (f"F.{name}", "training")
        self.report(
            f"{helper}() is called without {param}=, so its default {param}=True reaches "
            f"{call}(..., p={p}, {flag}={param}) while {owner} is in eval mode: dropout still "
            "drops activations after model.eval()",
            fix=f"pass {param}=self.training to {helper}() here", where=where)
        return True

    def _stated(self, name: str, p: Any) -> None:
        """``F.dropout(x, p, training=True)`` written in the forward of the outermost module of
        the call, that module in eval mode: the model itself is evaluated with dropout on
        (Coderx7/SimpleNet#2). A Monte Carlo pass (the same model on the same input again) makes
        it a choice for good; otherwise it is reported when the run ends."""
        module = self._eval_module(p)
        modules = self.state.modules
        if module is None or not modules or modules[0] is not module or self._held(module):
            return  # a sub-module's own choice (a Tacotron 2 pre-net), or training mode
        _, frame = _module_frame(self.state.functional_caller)
        where = user_location(self.state.functional_caller)
        if where is None or where in self.sampled or not self._is_literal(name):
            return
        given = _model_input(module, frame)
        if not _is_tensor(given):
            return
        passes = self.passes.setdefault(where, set())
        if len(passes) >= 64:
            return  # (enough passes seen: a Monte Carlo loop repeats its input right away)
        import torch

        if given.device.type not in ("cpu", "cuda"):
            return  # (a value read from a meta tensor raises)
        with torch.no_grad():
            sample = (id(module), given.data_ptr(), tuple(given.shape),
                      float(given.detach().float().sum()))
        if sample in passes:  # the same input again: Monte Carlo sampling
            self.sampled.add(where)
            self.pending.pop(where, None)
            return
        passes.add(sample)
        self.pending[where] = (type(module).__name__, name, p)

    def _held(self, module: Any) -> bool:
        """``module`` is a sub-module of a model the run called (a decoder's pre-net reached
        through the decoder's own ``inference()`` method, so outermost in that call): its choice,
        like any sub-module's. Cached per module."""
        key = id(module)
        if key not in self.held:
            self.held[key] = any(m is not module and any(c is module for c in m.modules())
                                 for m in self.state.models)
        return self.held[key]

    def on_exit(self) -> None:
        for where, (owner, name, p) in self.pending.items():
            self.report(
                f"F.{name}(..., p={p}) in {owner}.forward passes training=True while {owner}, "
                f"the model being evaluated, is in eval mode and samples each input once: "
                f"dropout still drops activations after model.eval(), so its outputs change "
                f"from call to call",
                fix="pass training=self.training (F.dropout(x, p, training=self.training)) or "
                    "use an nn.Dropout module", where=where)
        self.pending.clear()

    def _eval_module(self, p: Any) -> Any:
        """The calling module when it is in eval mode and ``p`` is above 0, else None."""
        try:
            if not p or float(p) <= 0.0:
                return None
        except (TypeError, ValueError):
            return None
        module = _calling_module(self.state.functional_caller)
        return None if module is None or module.training else module

    def _is_literal(self, name: str) -> bool:
        frame = self.state.functional_caller
        key = (id(frame.f_code), frame.f_lasti) if frame is not None else None
        known = self.literal.get(key)
        if known is None:
            index, keyword = (2, "train") if name.startswith("torch.") else (2, "training")
            known = _literal_true(frame, index, keyword)
            if len(self.literal) > 1024:
                self.literal.clear()
            self.literal[key] = known
        return known

    def _report_attention(self, module: Any, p: Any) -> None:
        owner = type(module).__name__
        self.report(
            f"F.scaled_dot_product_attention(..., dropout_p={p}) in {owner}.forward applies "
            f"attention dropout whatever the module's mode, and {owner} is in eval mode: the "
            "attention weights are still dropped after model.eval(), so evaluation is random "
            "(pytorch/pytorch#124464)",
            fix="pass dropout_p=self.dropout_p if self.training else 0.0",
            where=_keyword_location("dropout_p"))
