"""TG101 eval-in-train-mode: an evaluation pass ran while the model was in training mode.

What it watches: outermost module calls made directly from user code (not from a library such as
``torch.optim.swa_utils.update_bn``, nor recomputation during backward) while ``model.training`` is
True and the model has mode-dependent submodules active (:mod:`..core.modes`). Signs that such a
call is an evaluation:

- its output is passed to a loss that no backward will use: computed under ``no_grad`` or
  ``inference_mode``, or its graph died (or the run ended) without any backward reaching it;
- the caller's source (:mod:`..core.sites`, read once per call site) sends the output to a metric
  (``pred == y``, ``accuracy_score(...)``, ``correct += ....item()``, a ``return`` from
  ``evaluate()``), and no backward can reach it: made under ``no_grad`` (reported at once), or its
  graph died unreached. Outputs that also feed a loss inside a training iteration (a loop that
  calls ``backward`` or a ``step``) are left to the first sign (a teacher's target);
- with no metric or loss: the output is used (not a statement of its own, not assigned to names
  nothing reads, not read only for its shape) outside any training iteration (neither the call's
  loop or function nor up to 6 callers' lines call ``backward`` or ``step``). Under ``no_grad``
  (a model's ``generate``/``transcribe`` method, an index of embeddings, a top-k): at once; with
  grad on, when no backward reached it. In a loop or callers that only seem to train (an agent's
  ``env.step(action)``): at the end of the run, when the model was trained before the first call
  of that line and chain and no backward or step ran after it (:mod:`..core.after_training`).

A forward inside a function that trains may skip backward on purpose, so a loss alone says nothing
there. Such a call that fed a loss is followed with the chain of user lines that called the
function (``run_batch(x, y, train=False)`` from the validation loop) and the DataLoader iterated
last (one ``run_epoch()`` line for both phases of a phase loop, on two loaders). It is an
evaluation when it ran under ``no_grad`` while the same model line is trained elsewhere (reported
at once), or, at the end of the run, when no backward reached any call from its chain of callers,
calls of the same line from another chain (or DataLoader) were trained, and no backward ran between
it and the next model call (batches skipped on purpose come from the trained callers).

Reported where ``eval()`` belongs (:mod:`..core.callstack`, :mod:`..core.mode_history`), for a
call reported at once: the evaluation's line in the deepest frame it shares with the model's latest
``train()`` (not one restoring its own function's ``eval()``; without one, the latest checked
backward): inside the evaluation's own function when the shared frame calls one, else the
statement that started it. When user code's ``train()`` undid an ``eval()`` with no backward
since, at that ``train()`` (``self.train()`` left in ``validation_step``). Else at the model call.

Silent on: training forwards (a backward reaches the output; a second, logged loss of the same
output does not make it an evaluation); forwards in a loop that calls backward or a step (a batch
skipped on purpose, hard-example mining), unless the callers tell an evaluation as above;
BatchNorm recalibration and ``update_bn`` (output dropped, or a library's call); a dummy forward
sizing a layer or a shape test (only its shape read, or run in a module's ``__init__``); targets
made under ``no_grad`` by a helper the update loop calls (PPO advantages); checkpoint recomputation
(inside backward); RL rollouts in a training loop; Monte Carlo dropout (:mod:`..core.sampling`);
models without mode-dependent modules; evaluation after ``model.eval()``; a no-grad output passed
to a loss beside a name holding a graph in the caller's frame (a BYOL target network in training
mode, Lightning-Universe/lightning-bolts#801: the loss trains the online branch).

Cost: per checked outermost forward, its output's first 4 tensors, 12 frames (a module's
``__init__``?), one parse of its file (cached), the callers' lines (64 frames, 6 callers); 8
candidates and 3 x 256 followed graphs (``Unreached``), resolved at each step and at exit. On the
first 8 checked backward calls, one in 32 after, and each user ``train()``, the user's stack (32
frames); on a finding, each frame's ``self``.
Reference: ``torch.nn.Module.eval`` docs
(https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.eval); GitHub
wolny/pytorch-3dunet#53 (validation through the training forward), princeton-vl/
pytorch_stacked_hourglass#44 (validation in train mode updated BatchNorm's statistics),
sinhasam/vaal#2 (test accuracy from ``argmax`` in train mode), ipolharvard/ethos-ares#20
(inference under ``inference_mode`` without ``eval()``).
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from trainguard.sanitize.core.after_training import AfterTraining
from trainguard.sanitize.core.callstack import (callers, callers_train, differing,
                                                in_module_init, line_of)
from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.loader_serials import LoaderSerials
from trainguard.sanitize.core.sites import SiteReader
from trainguard.sanitize.core.frames import names_hold_graph, short_location
from trainguard.sanitize.core.mode_history import Candidate, ModeHistory, reverted_at
from trainguard.sanitize.core.modes import active_in_training, describe, hooked_by_user
from trainguard.sanitize.core.records import ForwardCall, LossCall, ModeCall, first_tensor
from trainguard.sanitize.core.sampling import Sampling
from trainguard.sanitize.core.state import Unreached


class EvalInTrainMode(Check):
    code = "TG101"
    on_demand = ("on_step", "on_backward_done")  # only while graphs are followed

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.candidates: list[Candidate] = []
        self.pending = Unreached(self.state)  # outputs that fed a loss
        self.metric_outputs = Unreached(self.state)  # outputs the source sends to a metric
        self.sites = SiteReader()
        # Calls made inside a function that trains (by the source), followed on checked steps:
        self.trainers = Unreached(self.state)
        # model line -> (callers, loader) of calls whose output a backward reached
        self.trained: dict[Any, set[tuple]] = {}
        # (model line, callers, loader) -> [calls no backward reached and none followed, the first]
        self.idle: dict[tuple, list] = {}
        self.waiting: list[Candidate] = []  # followed calls before the next model call
        self.loaders = LoaderSerials()  # the DataLoader iterated last, by serial number
        # (weak reference, line, backward calls then, after a library's eval()): the last train()
        # user code called on a module in eval mode (``on_mode``)
        self.train_at: tuple[Any, Any, int, bool] | None = None
        self.history = ModeHistory()  # where each model was put in its mode (the cause)
        self.caller_trains: dict[tuple, bool] = {}  # see callstack.callers_train
        self.sampling = Sampling()  # Monte Carlo dropout draws (see core.sampling)
        self.after = AfterTraining()  # calls in a training loop by the source, until one trains

    def on_root_forward(self, call: ForwardCall) -> None:
        if self.waiting:
            self._settle_waiting()
        repeat = self.sampling.repeats(call)  # (a Monte Carlo dropout draw: core.sampling)
        self._resolve()
        if repeat:
            self.after.drop(call.where)
        if repeat or not call.training or self.state.in_backward:
            return
        if not call.direct:  # (a library's call: only the user's own train() is the cause)
            if not call.grad_enabled and self.train_at is not None:
                self._library_eval(call)
            return
        active = active_in_training(call.module)
        if not active or in_module_init(sys._getframe(1)):  # (a layer sized while built)
            return
        outputs = first_tensor(call.output)
        if not outputs:
            return
        cand = Candidate(outputs, call.where, type(call.module).__name__, active,
                          call.grad_enabled, self.state.backward_count)
        cand.reverted = reverted_at(self.train_at, self.state.backward_count, call.module)
        cand.module = weakref.ref(call.module)
        self.candidates.append(cand)
        del self.candidates[:-8]
        uses = self.sites.uses(call.where)
        if uses is None:
            return
        cand.trains = uses.trains
        if uses.trains:
            cand.callers = callers(call.where, sys._getframe(1))
            cand.loader = self.loaders.current
        if uses.metric is None and uses.loss is None:
            if (uses.used or hooked_by_user(call.module)) and not uses.trains:
                self._used_outside_training(cand, outputs, call)
            elif uses.used:  # (an evaluation when nothing trains after it: core.after_training)
                self._after_training(cand, call)
            return
        if uses.loss is not None and (uses.trains or not call.grad_enabled and
                                      names_hold_graph(uses.partners, sys._getframe(1))):
            return  # a teacher's or target network's output: the target of a trained loss
        fed = f"was {uses.metric}" if uses.metric else f"fed {uses.loss}"
        graphs = [t for t in outputs if t.grad_fn is not None]
        if not graphs:
            cand.keep_stack(self.history)
            mode = "under torch.no_grad()" if not call.grad_enabled else "without a graph"
            self.sampling.offer(cand.active, call, lambda: self._fire(cand, f"{mode}, and its "
                                                                     f"output {fed}"))
            return
        for tensor in graphs:
            self.metric_outputs.add(tensor, (cand, fed))
        self.arm()

    def _used_outside_training(self, cand: Candidate, outputs: list[Any],
                               call: ForwardCall) -> None:
        """An output used (by the source) outside any training iteration (no backward or step in
        its loop, function or callers). Under ``no_grad``/``inference_mode`` (``generate()``, an
        embedding index, an argmax) reported at once; with grad on, when no backward reached it.
        Dropped outputs and shape reads (BatchNorm recalibration, layer sizing) stay silent."""
        if callers_train(self.sites, sys._getframe(2), self.caller_trains):
            self._after_training(cand, call)
            return
        if not cand.grad_enabled:
            import torch

            cand.keep_stack(self.history)
            mode = ("torch.inference_mode()" if torch.is_inference_mode_enabled()
                    else "torch.no_grad()")
            self.sampling.offer(cand.active, call, lambda: self._fire(
                cand, f"under {mode}, and its output is used outside any training step, so no "
                      "backward can reach it"))
            return
        graphs = [t for t in outputs if t.grad_fn is not None]
        if graphs:  # (reported at the model call: no stack taken on a path training may run)
            for tensor in graphs:
                self.metric_outputs.add(tensor, (cand, "is used outside any training step"))
            self.arm()

    def _after_training(self, cand: Candidate, call: ForwardCall) -> None:
        key = (call.where, callers(call.where, sys._getframe(1)))
        if self.after.wants(key, call.module, self.state):
            cand.keep_stack(self.history)
            self.after.keep(key, cand, self.state)

    def on_backward(self, call: Any) -> None:
        self.sampling.release()
        self.history.note_backward(self.state.backward_count)

    def on_mode(self, call: ModeCall) -> None:
        self.sampling.release()
        if call.mode and not call.was_training and call.direct:  # a train() undoing an eval()
            self.train_at = (weakref.ref(call.module), call.where, self.state.backward_count,
                             call.after_library_eval)
        if call.direct and call._frame is not None:
            self.history.note_mode(call.module, call.mode, call._frame, self.state.backward_count)

    def _library_eval(self, call: ForwardCall) -> None:
        """A library's evaluation loop (a ``Trainer``'s ``prediction_step``) called the model under
        ``no_grad`` after user code (a callback) undid that loop's ``eval()``: reported at the
        user's ``train()``. ``swa_utils.update_bn`` after the user's own ``eval()`` is silent."""
        found = self.train_at
        if found is None or not found[3]:  # (a library other than an evaluation loop: update_bn)
            return
        reverted = reverted_at(self.train_at, self.state.backward_count, call.module)
        active = active_in_training(call.module) if reverted is not None else None
        if not active:
            return
        cand = Candidate([], call.where, type(call.module).__name__, active, False)
        cand.reverted = reverted
        self._fire(cand, "under torch.no_grad(), called by the library's evaluation loop")

    def _follow_trainer(self, cand: Candidate, loss: str) -> None:
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
            cand.keep_meant(self.history)  # (the evaluation's own train() call, if it made one)
            if trained and cand.callers in trained:  # a phase loop: one line, both phases
                self._fire(cand, f"under torch.no_grad(), and its output fed {loss}, while the "
                                 "same line with grad enabled trains the model")
            elif trained:
                self._fire(cand, f"under torch.no_grad() when called from "
                                 f"{line_of(differing(cand.callers, trained))}, and its output fed "
                                 f"{loss}, while the same line trains the model when called from "
                                 f"{line_of(differing(next(iter(trained)), (cand.callers,)))}")
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

    def _note_quiet(self, cand: Candidate) -> None:
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
        reached: list[Candidate] = []
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
        for (where, chain, loader), (count, first) in idle.items():
            trained = self.trained.get(where)
            if trained and (chain, loader) not in trained:
                self._fire_trainer(first, trained, count)

    def _fire_trainer(self, cand: Candidate, trained: set[tuple], count: int) -> None:
        chains = {c for c, _ in trained}
        if cand.callers in chains:  # the same lines, batches of another DataLoader
            mine = self.loaders.describe(cand.loader)
            theirs = next((self.loaders.describe(loader) for c, loader in trained
                           if c == cand.callers), "another")
            how = (f"on the batches of a DataLoader ({mine}), and its output fed {cand.loss}, "
                   f"but no backward reached it, while the same line trains the model on the "
                   f"batches of another ({theirs})")
        else:
            how = (f"when called from {line_of(differing(cand.callers, chains))}, and its output "
                   f"fed {cand.loss}, but no backward reached it, while the same line trains the "
                   f"model when called from "
                   f"{line_of(differing(next(iter(chains)), (cand.callers,)))}")
        self._fire(cand, how, count=count)

    def on_loader_iter(self, loader: Any) -> None:
        self.loaders.note(loader)

    def _from_candidate(self, tensor: Any) -> Candidate | None:
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
            cand.keep_stack(self.history)
            self._fire(cand, f"under torch.no_grad(), and its output fed {call.name}")
            return
        # Training or not is decided by the model's output, not by this loss: another loss of it
        # may be the one backpropagated (a logged MAE beside it, co-teaching's per-sample losses)
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
        for cand in self.after.untrained(self.state):  # (its loop's step is not a training one)
            self._fire(cand, f"{'with grad enabled' if cand.grad_enabled else 'under no_grad'} "
                             "once the model was trained, and no backward or optimizer step ran "
                             "from then to the end of the run")

    def _resolve(self, final: bool = False) -> None:
        self.sampling.release()
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

    def _fire(self, cand: Candidate, how: str, count: int = 1) -> None:
        if cand.fired:
            return
        cand.fired = True
        fix = "call model.eval() before evaluating (and model.train() before training again)"
        where, after = cand.where, ""
        meant = None if cand.reverted else cand.meant or self.history.train_before(  # its own
            cand.module and cand.module(), cand.stack, cand.backwards, cand.where)  # train()
        cause = None if cand.reverted or meant else (cand.cause or self.history.missing_eval_at(
            cand.module and cand.module(), cand.stack))
        if cause is not None and cause[:2] != cand.where[:2]:
            where, after = cause, (
                f"; the evaluation's model call is at {short_location(cand.where)}, and "
                "model.eval() belongs before this line")
            fix = ("call model.eval() before this evaluation (and model.train() before training "
                   "again)")
        where, after, fix = meant or (where, after, fix)
        if cand.reverted is not None:  # the cause: a train() that undid the eval() before it
            where, after = cand.reverted, (
                f"; the model was in eval mode until this train() call put it back in training "
                f"mode, and the evaluation at {line_of(cand.where)} followed with no backward "
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
