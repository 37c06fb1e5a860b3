"""TG204 backward-without-grad: backward on a tensor that has no ``grad_fn``.

What it watches: the last outermost module call made with grad mode off (a normal training step
records nothing); the models seen (for frozen parameters, looked at only on the error); and, when a
backward raises, the roots' dtype, ``requires_grad``, inference flag and the grad mode at the call.

When it fires: the script dies of PyTorch's "element 0 of tensors does not require grad and does not
have a grad_fn", raised by ``backward`` or by ``torch.autograd.grad`` (an input gradient taken in an
evaluation step that runs under ``no_grad``, Lightning-AI/pytorch-lightning#2427). The diagnosis
says why the loss has no graph, the first that holds of: it is an integer or bool tensor
(``argmax``, ``round``, a comparison); it is an inference tensor (``torch.inference_mode``);
backward was called where grad mode was off (both reported at the ``@torch.no_grad()`` /
``@torch.inference_mode()`` decorating the function that called backward, if any; when a caller
turned it off, an optimizer's ``@torch.no_grad()`` ``step`` or a ``no_grad`` function calling a
callable it was handed, at that call: ``closure()`` runs under ``torch.enable_grad()`` by the
closure contract, HomebrewML/HeavyBall#10; when a bare ``torch.set_grad_enabled(False)`` statement
of the user's left it off, nothing switching it back on since, at that statement: its
``set_grad_enabled(True)`` skipped by a return or an exception, pytorch/pytorch#5851); a trained
tensor was rebound by its own update (``w = w - lr * w.grad`` under ``no_grad``: reported at that
assignment, ``core/rebound.py``); the last model forward ran under
``torch.no_grad()``/``inference_mode``; a module caches a copy of its trainable parameters made
under ``no_grad`` (reported at the store, ``core/grad_cache.py``); every parameter of the model is
frozen (when a model holding trainable parameters ran under ``no_grad`` earlier in the same step, an
adapter fed to a frozen head, reported at that forward as below, sicara/easy-few-shot-learning#40;
when the optimizer was built over parameters all frozen after the whole model was frozen and the
loop meant to unfreeze the picked ones stored ``False`` again, at that store; when a loop froze
every parameter of a model right after a new module was assigned to it in the same function,
``model.fc = nn.Linear(...)``, and the optimizer holds that module's parameters, at that loop:
``core/freeze_stores.py``); otherwise the loss was cut from the graph (``.detach()``,
``.item()``/``.numpy()`` and back, ``torch.tensor(loss)``, ``.data``). A forward under ``no_grad``
is reported at the training code's line that led to it: the call inside a ``with torch.no_grad():``
block on the way, also in a helper the step calls (hushell/sib_meta_learn#3), else the call of a
helper decorated with ``@torch.no_grad()``; else at the backward.

When the script catches the error (``except RuntimeError:`` around the step, which then skips
it or stops), the same diagnosis is reported at exit.

Silent on: runs without this error.

Cost: per checked outermost forward, two flags; only at a failed backward, one pass over the
models' parameters.

Reference: ``torch.autograd`` docs "Locally disabling gradient computation"
(https://pytorch.org/docs/stable/notes/autograd.html#locally-disabling-gradient-computation); the
error's usual causes as collected in
https://deepinout.com/pytorch/pytorch-questions/75_pytorch_runtime_error_element_0_of_tensors_does_not_require_grad_and_does_not_have_a_grad_fn.html.
"""

from __future__ import annotations

import ast
import sys
import weakref
from typing import Any

from trainguard.sanitize.core.callstack import (cause_line, no_grad_block_line, no_grad_reason,
                                                under_no_grad, user_stack)
from trainguard.sanitize.core.bounds import parse_file
from trainguard.sanitize.core.caught import Caught
from trainguard.sanitize.core.eval_block import evaluation_block
from trainguard.sanitize.core.check import Check, Diagnosis
from trainguard.sanitize.core.frames import (Location, frame_location, short_location,
                                             user_frame, user_frames)
from trainguard.sanitize.core.freeze_stores import NewModules, redundant_freeze, store_note
from trainguard.sanitize.core.grad_cache import gradless_cache
from trainguard.sanitize.core.loss_source import cut_in_source
from trainguard.sanitize.core.rebound import rebound_in_source
from trainguard.sanitize.core.records import BackwardCall, ForwardCall
from trainguard.sanitize.core.source import SourceFile, function_node

_MESSAGE = "does not require grad and does not have a grad_fn"


class BackwardWithoutGrad(Check):
    code = "TG204"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.last_forward: tuple | None = None
        self.grad_forward: Location | None = None  # the line of the last forward with grad on
        # the last forward with grad off and the backward count then: kept past later forwards
        # with grad on (a frozen model fed by a trainable one's no_grad output)
        self.gradless: tuple | None = None
        self.caught = Caught(4)  # the failed backward of each error, until claimed or the end
        self.frozen_by: tuple | None = None  # (optimizer ref, the store that left it frozen)
        self.new_modules = NewModules()  # (heads attached to built models: ``model.fc = ...``)

    def on_root_forward(self, call: ForwardCall) -> None:
        # Forwards without grad matter to the diagnosis; of a normal step only its line is kept.
        inference = not call.grad_enabled and self._inference()
        if not call.grad_enabled or inference:
            self.last_forward = (type(call.module).__name__, call.where, call.grad_enabled,
                                 inference, weakref.ref(call.module),
                                 user_stack(sys._getframe(1)))
            self.gradless = (self.last_forward, self.state.backward_count)
        else:
            self.last_forward = None
            self.grad_forward = call.where

    def on_built(self, obj: Any, where: Any) -> None:
        # an optimizer built over parameters that are all frozen: the store that left them so
        groups = getattr(obj, "param_groups", None)
        params = [p for g in groups for p in g.get("params", ())] \
            if isinstance(groups, list) and all(isinstance(g, dict) for g in groups) else []
        if where is not None and params and not any(p.requires_grad for p in params):
            frame = user_frame(sys._getframe(1))
            store = redundant_freeze(frame, where, params) if frame is not None else None
            attached = None if store is not None else self.new_modules.frozen_after(params)
            if store is not None or attached is not None:
                self.frozen_by = (weakref.ref(obj), store or attached[0], attached)

    def on_params_added(self, module: Any, params: list, where: Any) -> None:
        self.new_modules.note(params, where)

    def _frozen_store(self) -> tuple | None:
        """``(ref, store, head)`` found at the optimizer's construction while its parameters
        stay frozen (``head``: ``NewModules.frozen_after``'s, or None)."""
        optimizer = self.frozen_by[0]() if self.frozen_by is not None else None
        if optimizer is None or any(p.requires_grad for g in optimizer.param_groups
                                    for p in g["params"]):
            return None
        return self.frozen_by  # type: ignore[return-value]

    @staticmethod
    def _inference() -> bool:
        import torch

        return torch.is_inference_mode_enabled()

    def _frozen_model(self) -> str | None:
        """The class name of a model seen whose parameters are all frozen, if any."""
        for model in list(self.state.models):
            params = list(model.parameters())
            if params and not any(p.requires_grad for p in params):
                return type(model).__name__
        return None

    def _trainable_gradless(self, ref: Any) -> tuple | None:
        """The last forward of this step (since the last backward) that ran with grad off on a
        model holding trainable parameters (LoRA adapters under ``with torch.no_grad():``), and
        the training code's line that led to it (``ref``: the failed backward's user stack);
        None when there is none."""
        if self.gradless is None or self.gradless[1] != self.state.backward_count:
            return None
        forward = self.gradless[0]
        module = forward[4]()
        if module is None or not any(p.requires_grad for p in module.parameters()):
            return None
        stack = forward[5]
        return forward, no_grad_block_line(stack, ref) or cause_line(stack, ref)

    def on_backward_failed(self, call: BackwardCall, exc: BaseException) -> None:
        import torch

        if _MESSAGE not in str(exc) or not call.tensors:
            return
        root = call.tensors[0]
        call.facts["tg204"] = {
            "dtype": str(root.dtype).replace("torch.", ""),
            "floating": root.is_floating_point() or root.is_complex(),
            "inference": root.is_inference(),
            "grad_mode": torch.is_grad_enabled(),
            "shape": tuple(root.shape),
            "cut": self._cut(call),
            "rebound": self._rebound(call),
            "decorator": None if torch.is_grad_enabled() else _grad_off_decorator(call),
            "stack": user_stack(sys._getframe(1)),
        }
        facts = call.facts["tg204"]
        if not facts["grad_mode"] and facts["decorator"] is None:
            facts["caller_off"] = _grad_off_caller(call)
            # (inside an open no_grad block, that block is the cause)
            facts["switched_off"] = None if self.state.no_grad_depth else \
                _global_switch(self.state.grad_off_at)
        self.caught.hold(exc, call)  # reported at exit unless the run dies of it

    def _cut(self, call: BackwardCall) -> tuple[str, Location] | None:
        """The call that left the graph on the way from the last forward to this backward, read
        from the source of the function that called backward (its frame is still alive)."""
        frame = user_frame(sys._getframe(2))
        if frame is None or call.where is None or frame.f_code.co_filename != call.where[0]:
            return None
        return cut_in_source(frame, call.where[1], self.grad_forward)

    @staticmethod
    def _rebound(call: BackwardCall) -> tuple[str, Location] | None:
        """A trained tensor the function that called backward rebinds from its own gradient
        (``w = w - lr * w.grad`` under no_grad) and that no longer requires grad."""
        frame = user_frame(sys._getframe(2))
        if frame is None or call.where is None or frame.f_code.co_filename != call.where[0]:
            return None
        return rebound_in_source(frame)

    def on_error(self, exc: BaseException) -> Diagnosis | None:
        if not isinstance(exc, RuntimeError) or _MESSAGE not in str(exc):
            return None
        self.caught.claim(exc)  # the run dies of it: explained there
        failed = next((b for b in reversed(self.state.backwards) if b.failed), None)
        facts = failed.facts.get("tg204") if failed is not None else None
        if failed is None or facts is None:
            return None
        return self._diagnose(failed, facts)

    @staticmethod
    def _rebound_diagnosis(failed: BackwardCall, facts: dict,
                           rebound: tuple[str, Location]) -> Diagnosis:
        name, where = rebound
        api = failed.facts.get("api", "backward")
        why = (f"the tensor {api} was called on ({facts['dtype']}, shape {facts['shape']}) has no "
               f"grad_fn because `{name}` is rebound at {short_location(where)} by its own update "
               f"to a new tensor that does not require grad (made under torch.no_grad() or "
               f"detached), so the next forward builds no graph from it")
        fix = (f"update `{name}` in place (`{name} -= lr * {name}.grad` under torch.no_grad(), "
               f"or {name}.sub_(...)), or hand it to a torch.optim optimizer")
        return Diagnosis(why, fix=fix, where=where)

    def on_exit(self) -> None:
        """Backward errors the script caught (``except RuntimeError``: the step is skipped, or the
        run stops quietly): the loss had no graph all the same."""
        for failed in self.caught.drain():
            found = self._diagnose(failed, failed.facts["tg204"])
            self.report(f"{found.message}; backward raised \"element 0 of tensors {_MESSAGE}\" "
                        "and the script caught the error", fix=found.fix,
                        where=found.where or failed.where)

    def _diagnose(self, failed: BackwardCall, facts: dict) -> Diagnosis:
        rebound = facts.get("rebound")
        if facts["floating"] and not facts["inference"] and facts["grad_mode"] \
                and rebound is not None:
            return self._rebound_diagnosis(failed, facts, rebound)
        api = failed.facts.get("api", "backward")  # or torch.autograd.grad (probes/backward.py)
        seen = f"the tensor {api} was called on ({facts['dtype']}, shape {facts['shape']})"
        forward = self.last_forward
        cut, where = facts["cut"], failed.where
        at = "" if cut is None else \
            f"; the path from the model ends at `{cut[0]}` ({short_location(cut[1])})"
        if not facts["floating"]:
            where = cut[1] if cut is not None else where
            why = (f"{seen} is an integer/bool tensor: it came from argmax, round, a comparison or "
                   f"an integer cast, through which no gradient flows{at}")
            fix = "compute the loss from the float outputs (logits), not from predicted classes"
        elif facts["inference"]:
            why = f"{seen} is an inference tensor: it was made under torch.inference_mode()"
            fix = "compute the training loss outside torch.inference_mode()"
            where = _decorated(facts, where)
        elif not facts["grad_mode"]:
            why = f"{api} was called where grad mode is off (inside torch.no_grad()); {seen} " \
                  "was built there too"
            fix = f"compute the loss and call {api} outside the torch.no_grad() block, or " \
                  "under torch.enable_grad() where the gradient is wanted there (e.g. " \
                  "@torch.enable_grad() on an evaluation step that takes input gradients)"
            where = _decorated(facts, where)
            if facts.get("caller_off"):
                why, fix, where = _caller_off(api, why, *facts["caller_off"])
            elif facts.get("switched_off"):
                why, fix, where = _switched_off(api, seen, facts["switched_off"], failed.where)
        elif forward is not None and (not forward[2] or forward[3]):
            how = "torch.inference_mode()" if forward[3] else "torch.no_grad()"
            why = (f"{seen} comes from {forward[0]}'s forward at {short_location(forward[1])}, "
                   "which ran "
                   f"under {how} (grad mode off), so its output has no grad_fn")
            fix = f"run the training forward outside {how}"
            # the training code's line that led to that forward (``pred = query(field, xy)``,
            # a helper decorated with ``@torch.no_grad()``): the line to change; but when a
            # ``with torch.no_grad():`` block on the way holds the call (a feature helper's
            # block that also runs the trainable model), the call inside that block
            stack = facts.get("stack") or ()
            called = no_grad_block_line(forward[5], stack) or cause_line(forward[5], stack)
            where = called if called is not None else where
        elif cached := gradless_cache(list(self.state.models)):
            why = (f"{seen} has no grad_fn because {cached[0]}.{cached[1]}, computed from its "
                   f"trainable parameters at {short_location(cached[2])}, does not require grad: "
                   "it was cached by a call under torch.no_grad() (an evaluation before "
                   "training) and the training forward reuses it")
            fix = (f"recompute {cached[1]} on every call (or only cache it while "
                   "torch.is_grad_enabled() is False, without reusing it in training)")
            where = cached[2]
        elif (frozen := self._frozen_model()) \
                and (fed := self._trainable_gradless(facts.get("stack") or ())):
            why = (f"{seen} has no grad_fn: every parameter of {frozen} is frozen "
                   f"(requires_grad=False), and {fed[0][0]}, which holds trainable parameters, "
                   f"ran its forward at {short_location(fed[0][1])} under torch.no_grad() in "
                   "this step, so what it passed on to the loss has no grad_fn either")
            fix = (f"run {fed[0][0]}'s forward outside torch.no_grad() in the training step, "
                   "so its trainable parameters get gradients")
            where = fed[1] or where
        elif frozen:
            why = (f"{seen} has no grad_fn because every parameter of {frozen} is frozen "
                   "(requires_grad=False)")
            fix = "unfreeze the parameters to train (p.requires_grad_(True)) or do not call backward"
            found = self._frozen_store()
            if found is not None:  # (a store, or a loop, that left the optimizer's all frozen)
                note, fix = store_note(found[2], short_location(where))
                why, where = why + note, found[1]
        else:
            why = (f"{seen} was cut from the graph: .detach(), .item() or .numpy() and back, "
                   f"torch.tensor(loss), .data, or an integer result (argmax) made float{at}")
            fix = ("compute the loss with torch operations on the model's output, without "
                   "detaching (for coordinates from bins: a softmax-weighted sum, not argmax)")
            where = cut[1] if cut is not None else where
        return Diagnosis(why, fix=fix, where=where)


def _grad_off_decorator(call: BackwardCall) -> Location | None:
    """The ``@torch.no_grad()`` / ``@torch.inference_mode()`` decorating the very function that
    called backward (a test-time adaptation step, a training step): the decorator turned grad
    mode off for the whole body, so it is the line to change. None otherwise (a ``with`` block
    of that function, or grad turned off by a caller)."""
    frame = user_frame(sys._getframe(2))
    if frame is None or call.where is None or frame.f_code.co_filename != call.where[0]:
        return None
    for deco in getattr(function_node(frame.f_code), "decorator_list", ()):
        func = deco.func if isinstance(deco, ast.Call) else deco
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        off = name in ("no_grad", "inference_mode") or name == "set_grad_enabled" and \
            isinstance(deco, ast.Call) and bool(deco.args) and \
            isinstance(deco.args[0], ast.Constant) and deco.args[0].value is False
        if off:
            return (call.where[0], deco.lineno, deco.col_offset + 1)
    return None


def _decorated(facts: dict, where: Location | None) -> Location | None:
    """Where grad was off at backward: the decorator of backward's own function, if any."""
    return facts.get("decorator") or where


def _grad_off_caller(call: BackwardCall) -> tuple[Location, Location] | None:
    """``(call, cut)`` when grad was off at ``call`` because a caller that runs a training step
    it was handed turned it off: the function that called backward has no ``no_grad`` of its own
    around it, and the innermost user frame above it calls into it from a ``with
    torch.no_grad():`` block or a function decorated with ``@torch.no_grad()``, as an
    optimizer's ``step`` (its ``self`` a ``torch.optim.Optimizer``) or by a parameter of its own
    (``closure()``): the closure contract says the step runs it with grad on, as torch.optim's
    own optimizers do; or from a ``no_grad`` block that runs a model of its own (an attack called
    beside an evaluation's forwards: ``core/eval_block.py``). That call's line and the
    ``with``/decorator line; None otherwise (an evaluation calling its own test step under
    no_grad: the step asks for grad itself)."""
    import torch

    if call.where is None or under_no_grad(call.where):
        return None
    for frame in list(user_frames(user_frame(sys._getframe(2)), limit=16))[1:]:
        where = frame_location(frame)
        cut = no_grad_reason(where)
        if cut is None:
            continue
        file = SourceFile.load(where[0])
        node = file.call_at(where[1], where[2] - 1) if file is not None else None
        code = frame.f_code
        params = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        handed = isinstance(getattr(node, "func", None), ast.Name) and node.func.id in params
        if handed or isinstance(frame.f_locals.get("self"), torch.optim.Optimizer):
            return where, cut
        block = evaluation_block(frame, where)  # (an attack swept into an evaluation block)
        return (where, block) if block is not None else None
    return None


def _caller_off(api: str, why: str, called: Location,
                cut: Location) -> tuple[str, str, Location]:
    """The diagnosis of a backward whose function a caller runs with grad off (``called``: the
    caller's line, under the ``no_grad`` at ``cut``)."""
    why += (f"; the function that calls {api} is itself called at {short_location(called)} with "
            f"grad turned off there (torch.no_grad() at {short_location(cut)}), so every "
            "forward it runs builds no graph")
    fix = ("make that call under `with torch.enable_grad():` (as torch.optim's optimizers do "
           "around `closure()`), or move it out of the no_grad region")
    return why, fix, called


def _global_switch(where: Location | None) -> Location | None:
    """``where`` when it holds a bare ``torch.set_grad_enabled(...)`` statement (a global
    switch, not a ``with`` block or a decorator, which restore the mode themselves)."""
    tree = parse_file(where[0]) if where is not None else None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Expr) and node.lineno == where[1] and \
                isinstance(node.value, ast.Call) and \
                ast.unparse(node.value.func).rsplit(".", 1)[-1] == "set_grad_enabled":
            return where
    return None


def _switched_off(api: str, seen: str, switch: Location,
                  called: Location | None) -> tuple[str, str, Location]:
    """The diagnosis of a backward at ``called`` run with grad off since a global
    ``torch.set_grad_enabled(False)`` at ``switch`` that nothing switched back on (its
    ``set_grad_enabled(True)`` skipped by an early return, or by an exception the caller
    caught)."""
    why = (f"{api} at {short_location(called)} was called with grad mode off, and {seen} was "
           "built with it off too: this bare torch.set_grad_enabled(False) switched it off for "
           "the whole process and grad was not switched back on before (an exception or a "
           "return between it and its set_grad_enabled(True) skips that), so every later "
           "forward builds no graph")
    fix = ("turn grad off with a block that restores it however it exits: `with "
           "torch.no_grad():` (or `with torch.set_grad_enabled(False):`), or restore it in a "
           "`finally:`")
    return why, fix, switch
