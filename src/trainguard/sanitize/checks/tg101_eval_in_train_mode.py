"""TG101 eval-in-train-mode: an evaluation pass ran while the model was in training mode.

What it watches: outermost module calls made directly from user code (not from a library such as
``torch.optim.swa_utils.update_bn``, nor recomputation during backward) while ``model.training`` is
True and the model has mode-dependent submodules active (Dropout with ``p > 0``, BatchNorm tracking
running statistics). Two signs that such a call is an evaluation:

- its output is passed to a loss (a loss module or ``F.cross_entropy``, ``F.mse_loss``, ...) that
  no backward will use: the loss was computed under ``torch.no_grad()``/``inference_mode``, or its
  graph died (or the run ended) without any backward (``backward()`` or ``torch.autograd.grad``)
  reaching it;
- the caller's source sends the output to a metric (``pred == y``, ``accuracy_score(...)``,
  ``correct += ....item()``, a ``return`` from ``evaluate()``/``predict()``; see
  :mod:`._output_uses`, read once per call site), and no backward can reach the output: it was
  made under ``no_grad``/``inference_mode`` (then the finding comes at once), or its graph died
  unreached. Outputs that, by the source, also feed a loss inside a training iteration (a loop
  that calls ``backward`` or a ``step``) are left to the first sign: a teacher's output used as a
  target is training, not evaluation.

A forward inside a function that trains (by the source: its loop, or the function itself, calls
``backward`` or a ``step``) may skip backward on purpose, so the first sign alone says nothing
there. Such a call that fed a loss is followed with the chain of user lines that called the
function (``run_batch(x, y, train=False)`` from the validation loop, ``run_batch(x, y, True)`` from
the training loop) and the DataLoader iterated last (one ``run_epoch()`` line for both phases of a
phase loop, on two loaders). It is an evaluation when it ran under ``no_grad`` while the same model
line is trained elsewhere (the phase loop of PyTorch's transfer-learning tutorial without its
``model.eval()``; reported at once), or, decided at the end of the run, when no backward reached
any call from its chain of callers, calls of the same line from another chain (or DataLoader) were
trained, and no backward ran between it and the next model call (a loss only logged inside a
training step is followed by that step's backward). Batches skipped on purpose come from the same
callers as the trained ones, or from callers that train later.

Either way this is an evaluation or metric computed with Dropout dropping and BatchNorm using (and
updating) batch statistics. Reported at the line that called the model, once per call; when user
code's ``train()`` undid an ``eval()`` of the model with no backward since, at that ``train()``
(a ``self.train()`` left in a LightningModule's ``validation_step``: not a missing ``eval()``).

Silent on: training forwards (a backward reaches the output; a second loss of the same output
that is only logged does not make it an evaluation); forwards in a loop that calls backward or a
step (by the source: a batch skipped on purpose, hard-example mining under ``no_grad``), unless
the callers tell an evaluation as above; BatchNorm recalibration
and ``update_bn`` (the output is discarded, or the call is made by a library); activation
checkpointing's recomputation (runs inside backward); RL rollouts (the output goes to
``env.step``, not to a metric); Monte Carlo dropout with the model in eval mode and only its
Dropout modules switched to train; models without Dropout/BatchNorm; evaluation after
``model.eval()``.

Cost: per checked outermost forward, its output's first 4 tensors, one parse of its file
(``bounds.parse_file``: cached, files over 2,000,000 characters skipped) and the callers' lines (64
frames, 6 callers at most); at most 8 candidate calls and 3 x 256 followed graphs (``Unreached``),
resolved at each step and once more at exit.

Reference: ``torch.nn.Module.eval`` docs
(https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.eval); GitHub
wolny/pytorch-3dunet#53 (a trainer's validation through its training forward, no ``eval()``),
princeton-vl/pytorch_stacked_hourglass#44 (one function runs both phases; validation in train mode
updated BatchNorm's running statistics), nshaud/DeepHyperX#51 and sinhasam/vaal#2 (test accuracy
from ``argmax`` of a VGG with BatchNorm and Dropout left in train mode).
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.sites import SiteReader
from trainguard.sanitize.core.frames import frame_location, is_user_code
from trainguard.sanitize.core.modes import active_in_training, describe
from trainguard.sanitize.core.records import ForwardCall, LossCall, ModeCall, first_tensor
from trainguard.sanitize.core.state import Unreached


class _Candidate:
    __slots__ = ("outputs", "where", "model_name", "active", "grad_enabled", "fired", "trains",
                 "followed", "callers", "loader", "loss", "backwards", "quiet", "reverted")

    def __init__(self, outputs: list[Any], where: Any, model_name: str, active: list[Any],
                 grad_enabled: bool) -> None:
        self.outputs = [weakref.ref(t) for t in outputs]
        self.where = where
        self.model_name = model_name
        self.active = active  # the mode-dependent submodules in train mode at the call
        self.grad_enabled = grad_enabled
        self.fired = False
        self.trains = False  # by the source: the call sits in a loop that calls backward/step
        self.followed = False  # its outputs' graphs are followed (they fed a loss)
        self.callers: tuple = ()  # a training function's call: the user lines that called it
        self.loader = 0  # ... and the DataLoader iterated last (a serial number; 0: none)
        self.loss = ""  # ... and the loss its output goes to
        self.backwards = 0  # backward calls completed before it
        self.quiet: bool | None = None  # no backward ran before the next model call
        self.reverted: Any = None  # the user's ``train()`` line that undid an ``eval()``


class EvalInTrainMode(Check):
    code = "TG101"
    on_demand = ("on_step", "on_backward_done")  # only while graphs are followed

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.candidates: list[_Candidate] = []
        self.pending = Unreached(self.state)  # outputs that fed a loss
        self.metric_outputs = Unreached(self.state)  # outputs the source sends to a metric
        self.sites = SiteReader()
        # Calls made inside a function that trains (by the source), followed on checked steps:
        self.trainers = Unreached(self.state)
        # model line -> (callers, loader) of calls whose output a backward reached
        self.trained: dict[Any, set[tuple]] = {}
        # (model line, callers, loader) -> [calls no backward reached and none followed, the first]
        self.idle: dict[tuple, list] = {}
        self.waiting: list[_Candidate] = []  # followed calls before the next model call
        # DataLoaders by serial number (ids are reused once a loader per epoch is freed), and a
        # description of each ("batch_size=32, 384 samples")
        self.loaders: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self.loader_desc: dict[int, str] = {}
        self.loader = 0
        # (weak reference, line, backward calls then, after a library's eval()): the last train()
        # user code called on a module in eval mode (``on_mode``)
        self.train_at: tuple[Any, Any, int, bool] | None = None

    def on_root_forward(self, call: ForwardCall) -> None:
        if self.waiting:
            self._settle_waiting()
        self._resolve()
        if not call.training or self.state.in_backward:
            return
        if not call.direct:  # (a library's call: only the user's own train() is the cause)
            if not call.grad_enabled and self.train_at is not None:
                self._library_eval(call)
            return
        active = active_in_training(call.module)
        if not active:
            return
        outputs = first_tensor(call.output)
        if not outputs:
            return
        cand = _Candidate(outputs, call.where, type(call.module).__name__, active,
                          call.grad_enabled)
        cand.reverted = self._reverted_at(call.module)
        self.candidates.append(cand)
        del self.candidates[:-8]
        uses = self.sites.uses(call.where)
        if uses is None:
            return
        cand.trains = uses.trains
        if uses.trains:
            cand.callers = _callers(call.where)
            cand.loader = self.loader
        if uses.metric is None and uses.loss is None:
            return
        if uses.loss is not None and uses.trains:
            return  # e.g. a teacher's output as the target of a loss that is backpropagated
        fed = f"was {uses.metric}" if uses.metric else f"fed {uses.loss}"
        graphs = [t for t in outputs if t.grad_fn is not None]
        if not graphs:
            mode = "under torch.no_grad()" if not call.grad_enabled else "without a graph"
            self._fire(cand, f"{mode}, and its output {fed}")
            return
        for tensor in graphs:
            self.metric_outputs.add(tensor, (cand, fed))
        self.arm()

    def on_mode(self, call: ModeCall) -> None:
        if call.mode and not call.was_training and call.direct:  # a train() undoing an eval()
            self.train_at = (weakref.ref(call.module), call.where, self.state.backward_count,
                             call.after_library_eval)

    def _library_eval(self, call: ForwardCall) -> None:
        """A library's evaluation loop (a ``Trainer``'s ``prediction_step``) called the model under
        ``no_grad`` after user code (a callback) undid that loop's ``eval()``: reported at the
        user's ``train()``. ``swa_utils.update_bn`` after the user's own ``eval()`` is silent."""
        found = self.train_at
        if found is None or not found[3]:  # (a library other than an evaluation loop: update_bn)
            return
        reverted = self._reverted_at(call.module)
        active = active_in_training(call.module) if reverted is not None else None
        if not active:
            return
        cand = _Candidate([], call.where, type(call.module).__name__, active, False)
        cand.reverted = reverted
        self._fire(cand, "under torch.no_grad(), called by the library's evaluation loop")

    def _follow_trainer(self, cand: _Candidate, loss: str) -> None:
        """A forward inside a function that trains (by the source) fed a loss.

        Under ``no_grad`` it is reported at once when the same model line is trained (a backward
        reached an output of one of its calls); with grad on, its outputs are followed and
        :meth:`_resolve_trainers` decides at the end of the run. A call made at a script's top
        level has no callers to tell apart and is not followed (``on_loss`` checks that).
        """
        cand.followed = True
        cand.loss = loss
        if not cand.grad_enabled:
            trained = {callers for callers, _ in self.trained.get(cand.where, ())}
            if trained and cand.callers in trained:  # a phase loop: one line, both phases
                self._fire(cand, f"under torch.no_grad(), and its output fed {loss}, while the "
                                 "same line with grad enabled trains the model")
            elif trained:
                self._fire(cand, f"under torch.no_grad() when called from "
                                 f"{_line(_differing(cand.callers, trained))}, and its output fed "
                                 f"{loss}, while the same line trains the model when called from "
                                 f"{_line(_differing(next(iter(trained)), (cand.callers,)))}")
            return
        cand.backwards = self.state.backward_count
        self.waiting.append(cand)
        for ref in cand.outputs:
            tensor = ref()
            if tensor is not None:
                self.trainers.add(tensor, cand)
        if self.trainers:
            self.arm()

    def _settle_waiting(self) -> None:
        for cand in self.waiting:
            self._note_quiet(cand)
        self.waiting = []

    def _note_quiet(self, cand: _Candidate) -> None:
        """Decide, once, whether a backward ran between ``cand`` and the next model call (or
        now, when its graph is resolved before that call)."""
        if cand.quiet is None:
            cand.quiet = self.state.backward_count == cand.backwards

    def _resolve_trainers(self, final: bool) -> None:
        """Calls from callers that never trained, decided at the end of the run.

        A chain of callers (with the DataLoader iterated last) is an evaluation when no backward
        reached any of its calls, calls of the same model line from another chain or another
        DataLoader were trained, and its calls were each followed by the next model call with no
        backward in between (a loss only logged inside a training step is followed by that
        step's backward). Only the end of the run tells: a sparsely labelled stream whose first
        batches are skipped trains later from the same chain.
        """
        reached: list[_Candidate] = []
        for cand in self.trainers.resolve(final=final, reached=reached):
            self._note_quiet(cand)
            if cand.quiet:
                entry = self.idle.setdefault((cand.where, cand.callers, cand.loader), [0, cand])
                entry[0] += 1
        for cand in reached:
            self.trained.setdefault(cand.where, set()).add((cand.callers, cand.loader))
            self.idle.pop((cand.where, cand.callers, cand.loader), None)
        if not final:
            return
        idle, self.idle = self.idle, {}
        for (where, callers, loader), (count, first) in idle.items():
            trained = self.trained.get(where)
            if trained and (callers, loader) not in trained:
                self._fire_trainer(first, trained, count)

    def _fire_trainer(self, cand: _Candidate, trained: set[tuple], count: int) -> None:
        callers = {c for c, _ in trained}
        if cand.callers in callers:  # the same lines, batches of another DataLoader
            mine = self.loader_desc.get(cand.loader, "no DataLoader")
            theirs = next((self.loader_desc.get(loader, "no DataLoader")
                           for c, loader in trained if c == cand.callers), "another")
            how = (f"on the batches of a DataLoader ({mine}), and its output fed {cand.loss}, "
                   f"but no backward reached it, while the same line trains the model on the "
                   f"batches of another ({theirs})")
        else:
            how = (f"when called from {_line(_differing(cand.callers, callers))}, and its output "
                   f"fed {cand.loss}, but no backward reached it, while the same line trains the "
                   f"model when called from "
                   f"{_line(_differing(next(iter(callers)), (cand.callers,)))}")
        self._fire(cand, how, count=count)

    def on_loader_iter(self, loader: Any) -> None:
        serial = self.loaders.get(loader)
        if serial is None:
            serial = self.loaders[loader] = len(self.loader_desc) + 1
            try:
                desc = f"batch_size={loader.batch_size}, {len(loader.dataset)} samples"
            except Exception:  # an iterable dataset has no length
                desc = f"batch_size={getattr(loader, 'batch_size', None)}"
            self.loader_desc[serial] = desc
        self.loader = serial

    def _from_candidate(self, tensor: Any) -> _Candidate | None:
        for cand in reversed(self.candidates):
            if any(ref() is tensor for ref in cand.outputs):
                return cand
        return None

    def on_loss(self, call: LossCall) -> None:
        cand = self._from_candidate(call.input)
        if cand is None or cand.fired or cand.followed:
            return
        if cand.trains:
            # A forward in a loop that trains (by the source) may skip backward on purpose
            # (an easy batch, an extra loss only logged): an evaluation only by its callers.
            if cand.callers:
                self._follow_trainer(cand, call.name)
            return
        if not cand.grad_enabled:
            self._fire(cand, f"under torch.no_grad(), and its output fed {call.name}")
            return
        # Whether this was training is decided by the model's output, not by this loss: another
        # loss of the same output may be the one backpropagated (a logged MAE next to the
        # training loss, co-teaching's per-sample losses).
        cand.followed = True
        for ref in cand.outputs:  # one key: reaching any of its outputs makes it training
            tensor = ref()
            if tensor is not None:
                self.pending.add(tensor, (cand, call.name))
        if self.pending:
            self.arm()

    def on_step(self, optimizer: Any) -> None:
        self._resolve()

    def on_backward_done(self, call: Any) -> None:
        if self.metric_outputs or self.trainers:
            self._resolve()

    def on_exit(self) -> None:
        self._resolve(final=True)

    def _resolve(self, final: bool = False) -> None:
        if self.trainers or (final and self.idle):
            self._resolve_trainers(final)
        if self.metric_outputs:
            for cand, fed in self.metric_outputs.resolve(final=final):
                self._fire(cand, "with grad enabled, and no backward reached its output, which "
                                 + fed)
        if self.pending:
            for cand, loss_name in self.pending.resolve(final=final):
                self._fire(cand, f"with grad enabled, and its output fed {loss_name}, but no "
                                 "backward ever reached the output")
        if not self.pending and not self.metric_outputs and not self.trainers:
            self.disarm()

    def _fire(self, cand: _Candidate, how: str, count: int = 1) -> None:
        if cand.fired:
            return
        cand.fired = True
        fix = "call model.eval() before evaluating (and model.train() before training again)"
        where, after = cand.where, ""
        if cand.reverted is not None:  # the cause: a train() that undid the eval() before it
            where, after = cand.reverted, (
                f"; the model was in eval mode until this train() call put it back in training "
                f"mode, and the evaluation at {_line(cand.where)} followed with no backward "
                "in between")
            fix = ("remove this train() call from the evaluation (the evaluation loop put the "
                   "model in eval mode; training mode comes back before the next training step)")
        finding = self.report(
            f"{cand.model_name} ran in training mode ({describe(cand.active)} active) {how}: this is an "
            "evaluation, computed with Dropout dropping and BatchNorm using and updating batch "
            f"statistics{after}",
            fix=fix,
            where=where,
        )
        if finding is not None and count > 1:  # calls decided together: one report each
            finding.count += count - 1

    def _reverted_at(self, module: Any) -> Any:
        """The line of the user's ``train()`` that put ``module`` (or a module holding it) back in
        training mode from eval mode, with no backward since (the same evaluation), or None."""
        found = self.train_at
        if found is None or found[2] != self.state.backward_count:
            return None
        owner = found[0]()
        return found[1] if owner is not None and (
            owner is module or any(m is module for m in owner.modules())) else None


def _callers(where: Any, depth: int = 6) -> tuple | None:
    """The user lines that called the function holding the model call at ``where``, innermost
    first (at most ``depth``); None when the call is made at a script's top level."""
    frame = sys._getframe(2)
    for _ in range(64):  # up to the user's frame that made the model call
        if frame is None:
            return None
        if is_user_code(frame.f_code) and frame_location(frame) == where:
            break
        frame = frame.f_back
    else:
        return None
    if frame.f_code.co_name == "<module>":
        return None
    callers = []
    frame = frame.f_back
    while frame is not None and len(callers) < depth:
        if is_user_code(frame.f_code):
            callers.append(frame_location(frame))
        frame = frame.f_back
    return tuple(callers) if callers else None


def _differing(callers: tuple, others: Any) -> Any:
    """The innermost of ``callers`` that no chain in ``others`` has at the same place."""
    for i, loc in enumerate(callers):
        if all(len(other) <= i or other[i] != loc for other in others):
            return loc
    return callers[0]


def _line(loc: Any) -> str:
    return f"line {loc[1]}" if loc else "elsewhere"
