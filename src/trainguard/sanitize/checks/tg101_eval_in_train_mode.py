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

Either way this is an evaluation or metric computed with Dropout dropping and BatchNorm using (and
updating) batch statistics. Reported at the line that called the model, once per call.

Silent on: training forwards (a backward reaches the output; a second loss of the same output
that is only logged does not make it an evaluation); forwards in a loop that calls backward or a
step (by the source: a batch skipped on purpose, hard-example mining under ``no_grad``); BatchNorm recalibration
and ``update_bn`` (the output is discarded, or the call is made by a library); activation
checkpointing's recomputation (runs inside backward); RL rollouts (the output goes to
``env.step``, not to a metric); Monte Carlo dropout with the model in eval mode and only its
Dropout modules switched to train; models without Dropout/BatchNorm; evaluation after
``model.eval()``.

Reference: ``torch.nn.Module.eval`` docs
(https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.eval); GitHub
princeton-vl/pytorch_stacked_hourglass#44 (validation run in train mode updated BatchNorm's running
statistics), nshaud/DeepHyperX#51 and sinhasam/vaal#2 (test accuracy from ``argmax`` of a VGG with
BatchNorm and Dropout left in train mode).
"""

from __future__ import annotations

import weakref
from typing import Any

from trainguard.sanitize.checks import Check
from trainguard.sanitize.checks._output_uses import SiteReader
from trainguard.sanitize.modes import active_in_training, describe
from trainguard.sanitize.state import ForwardCall, LossCall, Unreached, first_tensor


class _Candidate:
    __slots__ = ("outputs", "where", "model_name", "active", "grad_enabled", "fired", "trains",
                 "followed")

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


class EvalInTrainMode(Check):
    code = "TG101"
    on_demand = ("on_step", "on_backward_done")  # only while graphs are followed

    def __init__(self, watcher: Any) -> None:
        super().__init__(watcher)
        self.candidates: list[_Candidate] = []
        self.pending = Unreached(self.state)  # outputs that fed a loss
        self.metric_outputs = Unreached(self.state)  # outputs the source sends to a metric
        self.sites = SiteReader()

    def on_root_forward(self, call: ForwardCall) -> None:
        self._resolve()
        if not call.training or self.state.in_backward or not call.direct:
            return
        active = active_in_training(call.module)
        if not active:
            return
        outputs = first_tensor(call.output)
        if not outputs:
            return
        cand = _Candidate(outputs, call.where, type(call.module).__name__, active,
                          call.grad_enabled)
        self.candidates.append(cand)
        del self.candidates[:-8]
        uses = self.sites.uses(call.where)
        if uses is None:
            return
        cand.trains = uses.trains
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

    def _from_candidate(self, tensor: Any) -> _Candidate | None:
        for cand in reversed(self.candidates):
            if any(ref() is tensor for ref in cand.outputs):
                return cand
        return None

    def on_loss(self, call: LossCall) -> None:
        cand = self._from_candidate(call.input)
        if cand is None or cand.fired or cand.trains or cand.followed:
            # A forward in a loop that trains (by the source) may skip backward on purpose
            # (an easy batch, an extra loss only logged): not an evaluation.
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
        if self.metric_outputs:
            self._resolve()

    def on_exit(self) -> None:
        self._resolve(final=True)

    def _resolve(self, final: bool = False) -> None:
        if self.metric_outputs:
            for cand, fed in self.metric_outputs.resolve(final=final):
                self._fire(cand, "with grad enabled, and no backward reached its output, which "
                                 + fed)
        if self.pending:
            for cand, loss_name in self.pending.resolve(final=final):
                self._fire(cand, f"with grad enabled, and its output fed {loss_name}, but no "
                                 "backward ever reached the output")
        if not self.pending and not self.metric_outputs:
            self.disarm()

    def _fire(self, cand: _Candidate, how: str) -> None:
        if cand.fired:
            return
        cand.fired = True
        self.report(
            f"{cand.model_name} ran in training mode ({describe(cand.active)} active) {how}: this is an "
            "evaluation, computed with Dropout dropping and BatchNorm using and updating batch "
            "statistics",
            fix="call model.eval() before evaluating (and model.train() before training again)",
            where=cand.where,
        )

