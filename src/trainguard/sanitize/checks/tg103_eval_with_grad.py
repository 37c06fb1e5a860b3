"""TG103 eval-with-grad: an evaluation forward builds an autograd graph that no backward uses.

What it watches: outermost module calls made from user code while the model is in eval mode
(``model.training`` False) and grad mode is on, whose output carries a ``grad_fn``. The output's
graph is followed without keeping it alive.

When it fires: the graph dies, or the run ends, without any backward (``backward()`` or
``torch.autograd.grad``) reaching it: the forward stored activations for a backward that never came,
which costs memory (and can run out of it on large evaluation batches). Reported at the line that
called the model; when the forward ran inside one of the model's own methods
(``model.get_context(x)``, ``model.embed(x)``: its layers are the outermost calls), at the line that
called that method (amyxlu/CPCProt#4), unless that method switched the model to eval mode itself
(``self.eval()`` in a ``predict()``): at its ``def`` line, where ``@torch.no_grad()`` goes, the
caller's line in the message (Sanster/IOPaint#7); when the line that called the model also ran
training forwards (a ``compute_loss(batch)`` shared by training and validation), at the evaluation's
call into the function holding it, one user frame out (jpata/particleflow#290); when the user's
``eval()`` ran in a function still running that reached the forward through a helper, at that
function's call into the helper (skorch-dev/skorch#219); when that function made the forward itself
and trains nothing by its source (a trainer's ``validate()``), at its ``def`` line, where
``@torch.no_grad()`` goes, the forward's line in the message (OpenNMT/OpenNMT-py#1141). A model
method that calls ``self(x)`` itself (a ``predict()`` written on the model) is the evaluation's own
code: at that call. A ``torch.no_grad()`` made as a statement of its own (never entered) before the
call, in the function making it, is reported at that statement (CosmiQ/solaris#414). A ``with``
around the call whose context a condition chose (``ctx = torch.no_grad() if phase == "valid" else
nullcontext()``, ``torch.set_grad_enabled(phase != "val")``) and that left grad on is reported at
that choice, with the values its condition read (:mod:`..core.grad_choice`).

Also in train mode: an outermost call fed a graph that an earlier call of the same module made
(an agent's state carried across environment steps), whose chained graph no backward reaches
(oxwhirl/pymarl#73): reported at that call; when the chain is a rollout that an evaluation runs
after a backward, through a helper, with no training by the source on the way (past the deepest
frame shared with the latest backward's stack), at the evaluation's call into the helper, where
``torch.no_grad()`` goes (namisan/mt-dnn#92).

Silent on: evaluation under ``torch.no_grad()``/``inference_mode`` (no ``grad_fn``); eval-mode
forwards whose output a backward reaches (adversarial examples, saliency, input optimisation);
frozen models whose output has no ``grad_fn``, or has one only because the input requires grad (no
parameter requires grad: an attack or a detection score that takes the input's gradient, among
forwards that only read a prediction, s-huu/TurningWeaknessIntoStrength#6); forwards inside a ``torch.enable_grad()`` region opened
under ``no_grad`` (TG104 reports those); models whose ``forward`` calls ``torch.autograd.grad``
(forces as an energy's gradient: they cannot run without grad).

Cost: per checked outermost forward in eval mode with grad on, its output's first 4 tensors
followed (256 at most, ``Unreached``); resolved at each forward and at exit.

Reference: autograd notes "Locally disabling gradient computation"
(https://pytorch.org/docs/stable/notes/autograd.html#locally-disabling-gradient-computation); GitHub
hszhao/semseg#60 ("out of memory" during validation without ``torch.no_grad()``) and
skorch-dev/skorch#218.
"""

from __future__ import annotations

import ast
import sys
import weakref
from typing import Any

from trainguard.sanitize.core.callstack import (discarded_no_grad, model_method_caller,
                                                shared_depth, user_stack)
from trainguard.sanitize.core.frames import (frame_location, short_location, user_frame,
                                             user_frames)
from trainguard.sanitize.core.grad_choice import chosen_grad_context
from trainguard.sanitize.core.graph import stamped_models
from trainguard.sanitize.core.mode_history import ModeHistory
from trainguard.sanitize.core.unreached import UnreachedOutputs
from trainguard.sanitize.core.records import ForwardCall, ModeCall, first_tensor
from trainguard.sanitize.core.source import SourceFile, function_node, trains


class EvalWithGrad(UnreachedOutputs):
    code = "TG103"
    stamps = "outputs"  # (a training-mode call fed its own earlier output: a rollout's state)

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.trained_at: set[tuple] = set()  # (path, line) of model calls seen training
        # id(module) -> (weakref, frame id, code) of the user's latest eval() on it
        self.evals: dict[int, tuple[Any, int, Any]] = {}
        self.history = ModeHistory()  # the user's stack at the latest backward
        # (model call line, stack's backward count) -> (where, note) of a carried state's chain
        self.entries: dict[tuple, tuple[Any, str]] = {}

    def on_root_forward(self, call: ForwardCall) -> None:
        self._resolve()
        if call.training and call.grad_enabled and call.where is not None:
            self.trained_at.add(call.where[:2])  # (a line training runs too: a shared step)
            self._follow_recurrent(call)
            return
        if (call.training or not call.grad_enabled or not call.direct or self.state.in_backward
                or call.reenabled or type(call.module) in self.state.grads_in_forward):
            return
        outputs = [t for t in first_tensor(call.output) if t.grad_fn is not None]
        if not outputs or not any(p.requires_grad for p in call.module.parameters()):
            return  # (a frozen model: the graph is the input's, kept for an attack's gradient)
        shapes = ", ".join(str(tuple(t.shape)) for t in outputs[:2])
        where, name, made = call.where, type(call.module).__name__, f"its output (shape {shapes})"
        trained = where is not None and where[:2] in self.trained_at  # (a line training runs)
        shared = None
        outer = None if _called_by_itself(call.module) else model_method_caller(call.module)
        if outer is not None and outer[2] == "forward":
            # ``self.model.forward(x)``: the model called by name, as model(x) at that line
            where, name, outer = outer[0], type(outer[1]).__name__, None
        if outer is not None:  # ``model.embed(x)``: the line calling the model's method
            where, owner, method = outer
            made = f"the output of its {name} (shape {shapes})"
            name = f"{type(owner).__name__}.{method}()"
            own = self._own_evaluation(call.module)
            if own is not None:  # ``predict()`` calling ``self.eval()`` itself: at its ``def``
                name = (f"{name} (called at {short_location(where)}; it switches the model to "
                        "eval mode itself, so `@torch.no_grad()` belongs on it)")
                where = own
        elif trained:
            # a step function training runs too (``compute_loss(batch)``): the evaluation's
            # call into it is where ``no_grad`` goes
            shared = _evaluation_call(where)
            if shared is not None:
                made = f"{made}, made through the step at {short_location(where)} that " \
                       "training also runs"
                where = shared
        where, note = _dropped_no_grad(where)
        chosen = None if note else chosen_grad_context(user_frame(sys._getframe(1)))
        if chosen is not None:  # ``with ctx:``, ctx chosen by a condition: at the choice
            where, note = chosen
        elif not note and not _called_by_itself(call.module):
            where, made = self._evaluation_frame(call.module, where, made, shared is None)
        for tensor in outputs:
            self.follow(tensor, (where, name, made + note))

    def on_backward(self, call: Any) -> None:
        self.history.note_backward(self.state.backward_count)  # (the training's stack)

    def on_mode(self, call: ModeCall) -> None:
        if call.mode or not call.direct or call._frame is None:
            self.evals.pop(id(call.module), None)
            return
        self.evals[id(call.module)] = (weakref.ref(call.module), id(call._frame),
                                       call._frame.f_code)
        if len(self.evals) > 64:
            self.evals = {k: v for k, v in self.evals.items() if v[0]() is not None}

    def _own_evaluation(self, module: Any) -> Any:
        """The ``def`` line of the model's method that ran this forward after switching that
        same model to eval mode itself (``self.eval()`` in a ``predict()`` written on the model,
        then ``self.encoder(x)``): the method is the evaluation, so ``@torch.no_grad()`` goes on
        it, whoever calls it; None otherwise (a helper of the model that an evaluation loop
        calls after its own ``model.eval()``, ``model.embed(x)``, stays at that call)."""
        evals = {(fid, code): ref for ref, fid, code in list(self.evals.values())}
        for frame in user_frames(user_frame(sys._getframe(2)), limit=8):
            ref = evals.get((id(frame), frame.f_code))
            if ref is None or ref() is None or frame.f_locals.get("self") is not ref() \
                    or not any(m is module for m in ref().modules()):
                continue
            node = function_node(frame.f_code)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return frame.f_code.co_filename, node.lineno, node.col_offset + 1
        return None

    def _evaluation_frame(self, module: Any, where: Any, made: str,
                          own: bool) -> tuple[Any, str]:
        """``(where, made)``: when the user's ``eval()`` on ``module`` (or a model holding it) ran
        in a function that is still running and that reached this forward through a helper of its
        own (``state = get_eval_state(model)`` after ``model.eval()``), that function's line
        calling the helper, with ``made`` naming the forward's line: the evaluation it set up is
        where ``no_grad`` goes, around that call. When that function made the forward itself
        (``own``: not through a step training shares), :func:`_evaluation_def`; else both
        unchanged."""
        frames = [(fid, code) for ref, fid, code in list(self.evals.values())
                  for m in (ref(),) if m is not None and any(x is module for x in m.modules())]
        if not frames or where is None:
            return where, made
        seen = False
        for frame in user_frames(user_frame(sys._getframe(2))):
            if (id(frame), frame.f_code) in frames:
                if not seen:  # (the eval()'s own function calls the model, or a shared step)
                    return _evaluation_def(frame, where, made) if own else (where, made)
                return frame_location(frame), (f"{made} (made at {short_location(where)}, in a "
                                               "helper this function calls here after its "
                                               "model.eval())")
            inline = frame.f_code.co_name in _INLINE  # (a comprehension of the function)
            seen = seen or frame_location(frame)[:2] == where[:2] and not inline
        return where, made

    def _follow_recurrent(self, call: ForwardCall) -> None:
        """A training-mode forward fed a graph its own module made earlier (an agent's belief
        or hidden state carried from one environment step to the next): followed like an
        evaluation's output, since acting chains every step into one graph that only a backward
        justifies (a policy gradient's episode loss reaches it: silent)."""
        if not call.direct or self.state.in_backward or call.reenabled:
            return
        inputs = [t for a in call.args for t in first_tensor(a) if t.grad_fn is not None]
        if not inputs or not any(id(call.module) in stamped_models(t) for t in inputs[:4]):
            return
        outputs = [t for t in first_tensor(call.output) if t.grad_fn is not None]
        if not outputs:
            return
        where, name = call.where, type(call.module).__name__
        outer = model_method_caller(call.module)
        if outer is not None:  # ``rssm.observe_step(h, ...)``: the line calling the method
            where, name = outer[0], f"{type(outer[1]).__name__}.{outer[2]}()"
        shapes = ", ".join(str(tuple(t.shape)) for t in outputs[:2])
        where, note = _dropped_no_grad(where)
        if not note and where is not None and self.history.backward_stack is not None:
            key = (where, self.history.backward_taken)  # (one stack read per line and epoch)
            if key not in self.entries:
                if len(self.entries) > 256:
                    self.entries.clear()
                self.entries[key] = _evaluation_entry(
                    user_stack(user_frame(sys._getframe(1))), self.history.backward_stack, where)
            where, note = self.entries[key]
        for tensor in outputs:
            self.follow(tensor, (where, name, shapes, note, True))

    def report_unreached(self, key: tuple) -> None:
        if len(key) == 5:
            where, name, shapes, note, _ = key
            if key in self.reached:  # a backward reached this chain before: a tail left over
                return  # (truncated BPTT's last chunk, an episode cut off at the end)
            self.report(
                f"{name} ran with grad enabled and its output (shape {shapes}) fed its own next "
                "call (a state carried from step to step): every call chained into one graph "
                "that no backward ever reached, so all their activations were kept for "
                f"nothing{note}",
                fix="collect experience (act, roll out, sample) under `torch.no_grad()`",
                where=where)
            return
        where, name, made = key
        self.report(
            f"{name} ran in eval mode with grad enabled: {made} carries a grad_fn, but no "
            "backward ever reached it, so the forward kept activations for nothing",
            fix="wrap evaluation in `with torch.no_grad():` (or torch.inference_mode())",
            where=where)


_INLINE = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>", "<lambda>")


def _evaluation_def(frame: Any, where: Any, made: str) -> tuple[Any, str]:
    """``(where, made)`` for a forward that the function which called ``model.eval()`` made
    itself: when that function is wholly an evaluation (a ``def``, no ``backward``, ``step`` or
    ``autograd.grad`` in it by the source: ``def validate(self, split)``), its ``def`` line, where
    ``@torch.no_grad()`` goes, with the forward's line in ``made``; else (a training function
    with an inline validation block, module code, a notebook cell, or a function holding a
    ``with torch.no_grad():`` block that the forward sits outside of) both unchanged."""
    node = function_node(frame.f_code)
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or trains(node) or any(
            isinstance(n, ast.With) and any(w in ast.unparse(n.items[0].context_expr)
                                            for w in ("no_grad", "inference_mode", "grad_enabled"))
            for n in ast.walk(node)):
        return where, made  # (a grad-off block in it that the forward missed: move it in)
    return (frame.f_code.co_filename, node.lineno, node.col_offset + 1), (
        f"{made} (made at {short_location(where)}; {node.name}() switches the model to eval "
        "mode and trains nothing, so `@torch.no_grad()` belongs on it)")


def _dropped_no_grad(where: Any) -> tuple[Any, str]:
    """``(where, note)``: the line of a ``torch.no_grad()`` statement that the function making
    the model call dropped unentered before the call (``torch.no_grad()`` alone on its line:
    grad mode never changed), with a note on it; else ``where`` unchanged and no note."""
    dropped = discarded_no_grad(user_frame(sys._getframe(2)))
    if dropped is None:
        return where, ""
    return dropped, (f"; the torch.no_grad() at {short_location(dropped)} is a statement of its "
                     "own: the context it makes is never entered, so grad mode never changed")


def _called_by_itself(module: Any) -> bool:
    """Whether the user frame that called ``module`` runs a method of that same module
    (``return self(x)`` in a ``predict()`` the model defines): the method is the evaluation's
    own code, written on the model, so ``no_grad`` goes at its line there."""
    frame = user_frame(sys._getframe(2))
    if frame is None or frame.f_code.co_name == "forward":
        return False
    code = frame.f_code
    return "self" in code.co_varnames[:max(code.co_argcount, 1)] and \
        frame.f_locals.get("self") is module


def _evaluation_call(where: Any) -> Any:
    """The user's line, one function out from the model call at ``where``, that called the
    function holding it (``validate()``'s ``self.compute_loss(batch)``); None when not found."""
    frame = user_frame(sys._getframe(1))
    while frame is not None and frame_location(frame)[:2] != where[:2]:
        frame = user_frame(frame.f_back)
    outer = user_frame(frame.f_back) if frame is not None else None
    return frame_location(outer) if outer is not None else None


def _evaluation_entry(at: Any, ref: Any, where: Any) -> tuple[Any, str]:
    """``(where, note)`` for a chain carried from call to call at ``where`` (user stack ``at``)
    by a rollout that an evaluation runs after training: past the deepest frame ``at`` shares
    with the latest backward's stack ``ref``, at the call into the first function of the
    evaluation (``rollouts = self.rollout(traj)`` in an ``evaluation()`` run after ``train()``;
    the shared frame's own call when that is the helper making the model call, a notebook
    cell's ``forecast(net, window)``), where ``torch.no_grad()`` goes (the helper may serve a
    multi-step training loss too). Only when neither that shared frame's line nor any function
    past it trains, by the source (no ``backward``, ``step`` or ``autograd.grad``: an agent
    acting between updates, its ``env.step(action)``, stays at its line). ``where`` and no
    note otherwise."""
    depth = shared_depth(at, ref)
    phase = [e for e in at[depth + 1:] if not e[1].co_name.startswith("<")] if depth >= 0 else []
    if not phase or _trains_at(at[depth][2]):
        return where, ""
    if any((node := function_node(e[1])) is None or trains(node) for e in phase):
        return where, ""
    # (a helper called straight from that frame, a notebook cell's loop: that frame's call)
    entry = at[depth][2] if phase[0][2][:2] == where[:2] else phase[0][2]
    return entry, (f", in a rollout made at {short_location(where)} by a helper that this "
                         "evaluation calls after training, with no backward or optimizer step "
                         "on the way: torch.no_grad() belongs around this call")


def _trains_at(loc: Any) -> bool:
    """Whether the call at ``loc`` sits, by the source, in a training iteration: its loop (or its
    function, outside loops) calls ``backward``, a ``step`` or ``autograd.grad``; True when the
    call cannot be read."""
    file = SourceFile.load(loc[0])
    call = file.call_at(loc[1], loc[2] - 1) if file is not None else None
    if call is None:
        return True
    scope = file.scope(call)
    region = file.loop(call, scope) or (None if isinstance(scope, ast.Module) else scope)
    return region is not None and trains(region)
