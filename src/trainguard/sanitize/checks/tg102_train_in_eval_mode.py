"""TG102 train-in-eval-mode: the model is trained (backward and optimizer step) in eval mode.

What it watches: outermost module calls made from user code with grad enabled while
``model.training`` is False and the model has Dropout (``p > 0``) or stat-tracking BatchNorm
submodules in eval mode. Their output's graph is followed without keeping it alive.

When it fires: a ``backward()`` reaches that output (putting gradients into ``.grad``; a
``torch.autograd.grad`` call returns them and leaves ``.grad`` alone) and then an optimizer step
updates parameters of that model: a training step taken in evaluation mode (typically
``model.train()`` once before the epoch loop and ``model.eval()`` inside it, so every epoch after
the first trains in eval mode). BatchNorm then neither learns batch statistics nor normalises with
them, and Dropout does not regularise. Reported at the cause: the ``eval()`` still in effect (on the
model, a module holding it, or one of its submodules), made by the training code or by a method of
an ``nn.Module``; when a function the training code called ran it (a rollout's ``select_action()``,
a validation helper, a callback, a model's ``generate()`` evaluating under ``no_grad``), where that
function returns with the model in eval mode, or the call that led to it (:func:`_placement`,
:mod:`..core.callstack`); at the top of an epoch loop that also evaluates, where ``train()``
belongs, when it ran only once, before that loop (:mod:`..core.train_once`); without an
``eval()`` (``model.training = False`` set by hand), at the line that called the model. The
message names the ``eval()``, the training forward and the latest ``train()``, run before it.

Silent on: BatchNorm frozen on purpose (``model.train()`` then ``bn.eval()``: the model itself is in
training mode; or BatchNorm whose affine parameters are frozen too, in a model with no active
Dropout kept in eval mode to train: DeepLab-style fine-tuning, isht7/pytorch-deeplab-resnet#15); a
model in eval mode with a mode-dependent part switched back to training mode (FixRes's
``model.eval()`` then ``last_bn.train()``, facebookresearch/FixRes#9); modes set part by part for
the step: a model whose eval-mode layers are norm layers only, put in eval mode for this forward (no
forward since its ``eval()``), while user code put another part that the stepping optimizer trains
in training mode since the last backward (a pretrained backbone's BatchNorm kept fixed beside a head
with Dropout, alexrich021/3dvnet#11); training set up in eval mode on purpose: the optimizer that
steps was built after the ``eval()`` in effect, so none of its steps ran in training mode (deep
generative prior's per-image fine-tuning, XingangPan/deep-generative-prior#8); models without
Dropout/BatchNorm; eval-mode forwards with backward but no step on the model's parameters
(adversarial examples, saliency maps, style transfer optimising an image); an attack that takes the
input's gradient with ``torch.autograd.grad`` in an evaluation between training steps (a PGD
robustness evaluation, Madry et al. 2018); an attack run in eval mode with ``backward()`` whose
parameter gradients a ``zero_grad()`` discards before the training step (adversarial training,
locuslab/fast_adversarial#14).

Cost: per checked outermost forward of a model in eval mode, one output followed (64 at most); at
the next optimizer step or ``zero_grad()``, one pass over the parameters of the models whose outputs
a backward reached; per user ``eval()``, and ``train()`` made from a new place, the user's stack
(32 frames at most); per such forward, a look at the ``train()`` calls since the last backward.

Reference: https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.train;
HuiZeng/Grid-Anchor-based-Image-Cropping-Pytorch#2 (``net.eval()`` in the test function, no
``net.train()`` after it) and pytorch/tutorials#1624.
"""

from __future__ import annotations

import ast
import weakref
from typing import Any

from trainguard.sanitize.core.callstack import (
    Stack, body_statement, cause_line, dispatched, evaluates_without_grad, function_end,
    sets_modes_only, shared_depth, user_stack)
from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.frames import short_location
from trainguard.sanitize.core.modes import (active_in_training, describe, frozen_norm, inactive,
                                            keeps_statistics)
from trainguard.sanitize.core.params import zeroed_by
from trainguard.sanitize.core.records import ForwardCall, ModeCall, first_tensor
from trainguard.sanitize.core.source import function_node
from trainguard.sanitize.core.state import GraphTrack
from trainguard.sanitize.core.train_once import train_once_before


class TrainInEvalMode(Check):
    code = "TG102"
    on_demand = ("on_step_pre",)  # only while outputs of an eval-mode model are followed

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.pending: list[GraphTrack] = []
        # id(module) -> (weak reference, the user's stack at its latest eval())
        self.eval_stacks: dict[int, tuple[Any, Stack, int]] = {}
        # id(module) -> (weak reference, line, backward calls completed then, whether it switched
        # the module out of eval mode, the user's stack (user calls only), order): where user code
        # last called ``train()`` on it (a call repeated with no backward since one that switched
        # keeps that one's line)
        self.train_at: dict[int, tuple[Any, Any, int, bool, Stack | None, int]] = {}
        self.calls = 0  # user train()/eval() calls seen: their order
        # id(optimizer) -> (weak reference, ``calls`` when it was built)
        self.built: dict[int, tuple[Any, int]] = {}

    def on_built(self, obj: Any, where: Any) -> None:
        from torch.optim import Optimizer

        if isinstance(obj, Optimizer):
            self.built[id(obj)] = (weakref.ref(obj), self.calls)
            if len(self.built) > 256:
                for key in [k for k, v in self.built.items() if v[0]() is None]:
                    del self.built[key]

    def on_mode(self, call: ModeCall) -> None:
        frame = call._frame  # (``call.where`` drops it)
        self.calls += 1
        if call.mode:
            self._note_train(call, frame if call.direct else None)
            return
        if not call.direct or frame is None:
            return
        self.eval_stacks[id(call.module)] = (weakref.ref(call.module),
                                             user_stack(frame, methods=True), self.calls,
                                             self.state.root_forwards)
        if len(self.eval_stacks) > 256:
            for key in [k for k, v in self.eval_stacks.items() if v[0]() is None]:
                del self.eval_stacks[key]

    def _note_train(self, call: ModeCall, frame: Any) -> None:
        key = id(call.module)
        prev = self.train_at.get(key)
        count = self.state.backward_count
        if prev is not None and prev[0]() is not call.module:
            prev = None
        if prev is not None and prev[3] and prev[2] == count:
            return  # switched here, and repeated with no backward since: keep the switch
        stack = None
        if frame is not None:  # the stack again only when the call comes from another place
            same = prev is not None and prev[4] and prev[4][-1][0] == id(frame) and (
                prev[4][-1][1] is frame.f_code and prev[1] == call.where)
            stack = prev[4] if same else user_stack(frame)
        self.train_at[key] = (weakref.ref(call.module), call.where, count, not call.was_training,
                              stack, self.calls)
        if len(self.train_at) > 256:
            for k in [k for k, v in self.train_at.items() if v[0]() is None]:
                del self.train_at[k]

    def on_root_forward(self, call: ForwardCall) -> None:
        if call.training or not call.grad_enabled or not call.direct or self.state.in_backward:
            return
        # (norm layers whose affine parameters are frozen too: a frozen BatchNorm, kept fixed)
        frozen = [m for m in inactive(call.module) if not frozen_norm(m)]
        if not frozen or active_in_training(call.module):
            # (a model in eval mode with a mode-dependent part switched back to training mode:
            # set so on purpose, FixRes's last BatchNorm re-estimating its statistics)
            return
        parts = self._parts(call.module, frozen)
        for tensor in first_tensor(call.output, limit=1):
            track = self.state.track_graph(
                tensor, info=(call.where, type(call.module).__name__, describe(frozen),
                              weakref.ref(call.module), user_stack(), parts))
            if track is not None:
                self.pending.append(track)
                self.arm()
        if len(self.pending) > 64:
            for t in self.pending[:-64]:
                t.release()
            del self.pending[:-64]

    def _parts(self, model: Any, frozen: list[Any]) -> list[Any]:
        """Modes set part by part for this step (``backbone.eval(); head.train()``): ``model``'s
        eval-mode layers are norm layers only and its ``eval()`` in effect came after its last
        forward; weak references to the modules apart from it put in training mode since then."""
        found = _eval_in_effect(self.state.eval_at, model)
        stacked = self.eval_stacks.get(found[0]) if found is not None else None
        if stacked is None or stacked[3] != self.state.root_forwards - 1 or \
                not all(keeps_statistics(m) for m in frozen):
            return []  # (a forward ran since that eval(): an evaluation left it so)
        inside, count = {id(m) for m in model.modules()}, self.state.backward_count
        return [ref for ref, _, done, _, _, _ in list(self.train_at.values())
                if done == count and (part := ref()) is not None and id(part) not in inside
                and not any(m is model for m in part.modules())]

    def on_zero_grad(self, owner: Any, set_to_none: bool) -> None:
        """Gradients a backward put into the parameters from an eval-mode forward are discarded
        here before any step used them (an attack run in eval mode, then ``zero_grad()`` and the
        training forward): that forward trained nothing."""
        if not any(t.accumulated for t in self.pending):
            return
        zeroed = {id(p) for p in zeroed_by(owner)}
        for track in self.pending:
            model = track.info[3]() if track.accumulated else None
            if model is not None and any(id(p) in zeroed for p in model.parameters()):
                track.release()
        self.pending = [t for t in self.pending if t.active and t.alive]

    def on_step_pre(self, optimizer: Any) -> None:
        self._settle(optimizer)
        if not self.pending:
            self.disarm()

    def _settle(self, optimizer: Any) -> None:
        if not self.pending:
            return
        reached = [t for t in self.pending if t.accumulated]
        if not reached:
            self.pending = [t for t in self.pending if t.alive]
            return
        stepped = {id(p) for g in optimizer.param_groups for p in g["params"]}
        for track in reached:
            where, name, frozen, model_ref, made, parts = track.info
            model = model_ref()
            if model is not None and any(id(p) in stepped for p in model.parameters()) and \
                    not any(id(p) in stepped for r in parts if (part := r()) is not None
                            for p in part.parameters()):
                self._report(model, where, name, frozen, optimizer, made)
            track.release()
        self.pending = [t for t in self.pending if t.active and t.alive]

    def _report(self, model: Any, where: Any, name: str, frozen: str, optimizer: Any,
                made: Stack) -> None:
        """Report at the ``eval()`` call still in effect (the cause), naming this training
        forward (``made``: its user stack) and the latest ``train()`` call, which came before
        that ``eval()``."""
        found = _eval_in_effect(self.state.eval_at, model)
        forward = f"the training forward at {short_location(where)}"
        if found is None:
            self.report(
                f"{name} is in eval mode (model.training=False; {frozen} in eval mode) during "
                f"this training forward: a backward reached its output and "
                f"{type(optimizer).__name__}.step() updated its parameters, so BatchNorm "
                "learns no batch statistics and Dropout does not regularise",
                fix="call model.train() at the start of every training epoch (after any "
                    "model.eval() for validation)",
                where=where)
            return
        module_id, set_at = found
        stacked = self.eval_stacks.get(module_id)
        built = self.built.get(id(optimizer))
        if stacked is not None and built is not None and built[0]() is optimizer and \
                built[1] >= stacked[2]:
            # the optimizer was built after this eval(): this training was set up in eval mode
            # on purpose (deep generative prior's per-image fine-tuning keeps the pretrained
            # BatchNorm statistics, XingangPan/deep-generative-prior#8), nothing left it there
            return
        trained = self.train_at.get(id(model))
        before = (f"; the last model.train() at {short_location(trained[1])} ran before it"
                  if trained is not None and trained[0]() is model and trained[1] else "")
        called, helper, asked = None, None, set_at
        if stacked is not None and stacked[0]() is not None:
            # (the module eval() was called on, which holds the one this forward ran)
            name = type(stacked[0]()).__name__
            step = user_stack()
            fresh = _fresh_training_call(stacked[1], step)
            if fresh is not None:  # train(model, loader) called after test(model, loader)
                self._report_fresh(fresh, name, set_at, f"{frozen} in eval mode",
                                   f"{forward}{before}", type(optimizer).__name__)
                return
            if self._train_once(model, stacked, step, name, frozen, forward, optimizer):
                return
            # (the forward's stack: a step function's own call that left eval, lc_loss()'s
            # get_blob_dict(model, batch), shares that function's frame with the forward)
            called, helper, asked = _placement(stacked[1], made or step, set_at)
        if called is not None and called[:2] != set_at[:2]:
            end = function_end(helper[1]) if helper is not None else None
            if end is not None and end[0] == asked[0] and end[1] >= asked[1]:
                func = helper[1].co_name  # (asked: its eval(), or its call of a mode setter)
                self.report(
                    f"{func}() puts {name} in eval mode ({name}.eval() at "
                    f"{short_location(asked)}) and returns without restoring training mode "
                    f"(model.training=False; {frozen} in eval mode); it was called at "
                    f"{short_location(called)} and nothing put {name} back in training mode "
                    f"before {forward}{before}: a backward reached that forward's output and "
                    f"{type(optimizer).__name__}.step() updated its parameters, so BatchNorm "
                    "learns no batch statistics and Dropout does not regularise",
                    fix=f"put {name} back in training mode before {func}() returns "
                        f"({name}.train() here), or call {name}.train() after the call at "
                        f"{short_location(called)}",
                    where=end)
                return
            self.report(
                f"this call ran {name}.eval() ({short_location(set_at)}) and left {name} in "
                f"eval mode (model.training=False; {frozen} in eval mode): nothing put it back "
                f"in training mode before {forward}{before}, a backward reached that forward's "
                f"output and {type(optimizer).__name__}.step() updated its parameters, so "
                "BatchNorm learns no batch statistics and Dropout does not regularise",
                fix="call model.train() right after this call (or at the start of every "
                    "training epoch)",
                where=called)
            return
        self.report(
            f"this eval() left {name} in eval mode (model.training=False; {frozen} in eval "
            f"mode), and nothing put it back in training mode before {forward}{before}: a "
            f"backward reached that forward's output and {type(optimizer).__name__}.step() "
            "updated its parameters, so BatchNorm learns no batch statistics and Dropout does "
            "not regularise",
            fix="restore the mode after this eval(), or call model.train() at the start of "
                "every training epoch",
            where=set_at)

    def _report_fresh(self, fresh: tuple[str, Any], name: str, set_at: Any, frozen: str,
                      forward: str, optimizer: str) -> None:
        """Report a training function called after the evaluation left ``name`` in eval mode
        (:func:`_fresh_training_call`), before its training loop."""
        func, where = fresh
        self.report(
            f"{func}() trains {name} in eval mode: the eval() at {short_location(set_at)} ran "
            f"in an evaluation called before {func}() (model.training=False; {frozen}), and "
            f"{func}() never puts {name} back in training mode before {forward}: a backward "
            f"reached that forward's output and {optimizer}.step() updated its parameters, so "
            "BatchNorm learns no batch statistics and Dropout does not regularise",
            fix=f"call {name}.train() at the start of {func}(), before this line (the "
                "evaluation sets eval mode for itself)", where=where)

    def _train_once(self, model: Any, stacked: tuple, step: Stack, name: str, frozen: str,
                    forward: str, optimizer: Any) -> bool:
        """Report at the top of the loop running the steps and the evaluation whose ``eval()`` is
        in effect (``stacked``: its stack and order) when the user's latest ``train()`` on
        ``model`` (or a module holding it) ran once, before it (:mod:`..core.train_once`)."""
        latest = None
        for ref, _, _, _, stack, order in list(self.train_at.values()):
            owner = ref()
            if (stack is None or order > stacked[2] or owner is None
                    or (latest is not None and order < latest[1])):
                continue
            if owner is model or any(m is model for m in owner.modules()):
                latest = (stack, order)
        found = train_once_before(latest[0], stacked[1], step) if latest is not None else None
        if found is None:
            return False
        train_at, loop = found
        evaluated = stacked[1][-1]
        inside = ("" if evaluated[1].co_name == "<module>" else f" (in {evaluated[1].co_name}())")
        self.report(
            f"model.train() belongs at the top of this loop: it runs only once, at line "
            f"{train_at[1]} before it, and the eval() at {short_location(evaluated[2])}{inside} "
            f"inside it leaves {name} in eval mode (model.training=False; {frozen} in eval mode) "
            f"for the steps after it: a backward reached the output of {forward} and "
            f"{type(optimizer).__name__}.step() updated its parameters, so BatchNorm learns no "
            "batch statistics and Dropout does not regularise",
            fix=f"call model.train() first in each iteration of the loop at line {loop[1]}",
            where=loop)
        return True


def _fresh_training_call(stacked: Stack, step: Stack) -> tuple[str, Any] | None:
    """``(function, where)`` when the training step runs inside a function (``train(model,
    loader)``, a library's ``fit()``) that the frame it shares with the ``eval()``'s stack called
    after the evaluation's own function, which ran the ``eval()``, returned: each call of it
    starts in the mode the evaluation left, so ``train()`` belongs at its first statement, before
    the set-up of its training loop. None otherwise (the evaluation runs inside the training
    function's call: an epoch loop calling a validation helper, reported by :func:`_placement`;
    a function of one step, called per iteration)."""
    depth = shared_depth(stacked, step)
    if depth < 0 or len(step) < depth + 2 or len(stacked) < depth + 2:
        return None
    entry = step[depth + 1]
    if entry[3] or entry[1].co_name in ("<module>", "<lambda>"):
        return None  # (a method of the model: its caller sets the mode)
    node, line = function_node(entry[1]), entry[2][1]
    held = body_statement(getattr(node, "body", None) or [], line)
    if not isinstance(held, (ast.For, ast.AsyncFor, ast.While)):
        return None  # a function of one step (an update, a train_step): its caller's loop
    first = node.body[0 if ast.get_docstring(node) is None else 1]  # (past a docstring)
    return entry[1].co_name, (entry[1].co_filename, first.lineno, first.col_offset + 1)


def _placement(stacked: Stack, step: Stack, set_at: Any) -> tuple[Any, Any, Any]:
    """``(called, helper, asked)`` for an ``eval()`` made with the user stack ``stacked``, still in
    effect at the training step ``step``. ``called``: the training code's call that led to it
    (None: report at the ``eval()`` itself: the training code made it, or a method of an
    ``nn.Module`` not evaluating under ``no_grad`` did: a module does not switch its own mode);
    ``helper``: the stack entry of the function the training code called that ran the
    ``eval()`` (a rollout's ``select_action()``, a snapshot, a validation helper, a callback),
    reported at its end, where the mode is restored before it returns; None when that function
    is in another file than the call (a helper module's function serves every caller) or only
    switches modes (``val_start()``, a callback's ``on_validation_begin``): then at
    ``called``, after which ``train()`` belongs (in a dispatched callback, its own line).
    ``asked``: ``helper``'s ``eval()``, or its call of a function that only switches the modes
    of the models passed (``set_mode("eval", models)`` in ``check_accuracy()``: its caller leaves
    the mode; a method, a wrapper's ``val_start()``, is the holder's switch the loop drives)."""
    called = cause_line(stacked, step)
    helper = stacked[-1]
    setter = helper[1].co_varnames[:1] != ("self",) and sets_modes_only(helper[1])
    if called is not None and len(stacked) > 1 and stacked[-2][2][0] == called[0] and \
            stacked[-2][2][:2] != called[:2] and not dispatched(stacked[-2][2]) and setter:
        helper = stacked[-2]  # (a function switching modes, of this file or a helper module)
        set_at = helper[2]
    if called is None or helper[2][:2] != set_at[:2] or helper[2][0] != called[0]:
        # (a helper module's function serves every caller: the call)
        return called, None, set_at
    callback = cause_line(stacked, step, past_dispatch=True)
    if sets_modes_only(helper[1]):
        return callback, None, set_at
    if helper[3] and not evaluates_without_grad(helper[1]):  # (a model's generate(): its end)
        return None, None, set_at
    if callback is not None and callback[:2] != called[:2]:
        # a hook the loop dispatches to each callback: that callback's own line (its eval())
        return callback, None, set_at
    return called, helper, set_at


def _eval_in_effect(eval_at: dict, model: Any) -> tuple[int, Any] | None:
    """``(id(module), line)`` of the ``eval()`` still in effect on ``model``: called on the
    model itself, on a module holding it, or on one of its submodules; None when user code made
    no such call."""
    entry = eval_at.get(id(model))
    if entry is not None and entry[0]() is model and entry[1]:
        return id(model), entry[1]
    inside = {id(m) for m in model.modules()}
    for key, (ref, where) in list(eval_at.items()):
        module = ref()
        if module is None or not where:
            continue
        if id(module) in inside or any(m is model for m in module.modules()):
            return key, where
    return None
