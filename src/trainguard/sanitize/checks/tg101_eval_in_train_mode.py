"""TG101 eval-in-train-mode: an evaluation pass ran while the model was in training mode.

What it watches: outermost module calls made directly from user code (not from a library such as
``torch.optim.swa_utils.update_bn``, nor recomputation during backward) while ``model.training`` is
True and the model has mode-dependent submodules active (Dropout with ``p > 0``, BatchNorm tracking
running statistics), and the losses computed from their outputs (loss modules and the functional
losses ``F.cross_entropy``, ``F.mse_loss``, ...).

When it fires: such an output feeds a loss that no backward will use: the loss was computed under
``torch.no_grad()``/``inference_mode``, or its graph died (or the run ended) without any backward
(``backward()`` or ``torch.autograd.grad``) reaching it. That is an evaluation or metric, computed
with Dropout dropping and BatchNorm using (and updating) batch statistics. Reported at the line
that called the model.

Silent on: training forwards (a backward reaches the loss); BatchNorm recalibration and
``update_bn`` (outputs feed no loss); activation checkpointing's recomputation (runs inside
backward); models without Dropout/BatchNorm; evaluation after ``model.eval()``; RL rollouts whose
outputs feed no loss.

Reference: ``torch.nn.Module.eval`` docs
(https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.eval); GitHub
princeton-vl/pytorch_stacked_hourglass#44 (validation run in train mode updated BatchNorm's running
statistics) and nshaud/DeepHyperX#51.
"""

from __future__ import annotations

import weakref
from typing import Any

from trainguard.sanitize.checks import Check
from trainguard.sanitize.modes import active_in_training, describe
from trainguard.sanitize.state import ForwardCall, GraphTrack, LossCall, first_tensor


class _Candidate:
    __slots__ = ("outputs", "where", "model_name", "active", "grad_enabled")

    def __init__(self, outputs: list[Any], where: Any, model_name: str, active: str,
                 grad_enabled: bool) -> None:
        self.outputs = [weakref.ref(t) for t in outputs]
        self.where = where
        self.model_name = model_name
        self.active = active
        self.grad_enabled = grad_enabled


class EvalInTrainMode(Check):
    code = "TG101"

    def __init__(self, watcher: Any) -> None:
        super().__init__(watcher)
        self.candidates: list[_Candidate] = []
        self.pending: list[GraphTrack] = []

    def on_root_forward(self, call: ForwardCall) -> None:
        if not call.training or self.state.in_backward or not call.direct:
            return
        active = active_in_training(call.module)
        if not active:
            return
        outputs = first_tensor(call.output)
        if outputs:
            self.candidates.append(_Candidate(outputs, call.where, type(call.module).__name__,
                                              describe(active), call.grad_enabled))
            del self.candidates[:-8]
        self._resolve()

    def _from_candidate(self, tensor: Any) -> _Candidate | None:
        for cand in reversed(self.candidates):
            if any(ref() is tensor for ref in cand.outputs):
                return cand
        return None

    def on_loss(self, call: LossCall) -> None:
        cand = self._from_candidate(call.input)
        if cand is None:
            return
        loss = call.output
        if getattr(loss, "grad_fn", None) is None:
            mode = "under torch.no_grad()" if not cand.grad_enabled else "without a graph"
            self._fire(cand, call.name, mode)
            return
        track = self.state.track_graph(loss, info=(cand, call.name))
        if track is not None:
            self.pending.append(track)

    def on_step(self, optimizer: Any) -> None:
        self._resolve()

    def on_exit(self) -> None:
        self._resolve(final=True)

    def _resolve(self, final: bool = False) -> None:
        if not self.pending:
            return
        keep = []
        for track in self.pending:
            if track.reached:
                track.release()
            elif not track.alive or final:
                cand, loss_name = track.info
                track.release()
                self._fire(cand, loss_name, "with grad enabled, and no backward reached the loss")
            else:
                keep.append(track)
        self.pending = keep

    def _fire(self, cand: _Candidate, loss_name: str, mode: str) -> None:
        self.report(
            f"{cand.model_name} ran in training mode ({cand.active} active) {mode}, and its output "
            f"fed {loss_name}: this is an evaluation, computed with Dropout dropping and BatchNorm "
            "using and updating batch statistics",
            fix="call model.eval() before evaluating (and model.train() before training again)",
            where=cand.where,
        )
