"""TG102 train-in-eval-mode: the model is trained (backward and optimizer step) in eval mode.

What it watches: outermost module calls made from user code with grad enabled while
``model.training`` is False and the model has Dropout (``p > 0``) or stat-tracking BatchNorm
submodules in eval mode. Their output's graph is followed without keeping it alive.

When it fires: a backward reaches that output and then an optimizer step updates parameters of
that model: a training step taken in evaluation mode (typically ``model.train()`` once before the
epoch loop and ``model.eval()`` inside it, so every epoch after the first trains in eval mode).
BatchNorm then neither learns batch statistics nor normalises with them, and Dropout does not
regularise. Reported at the line that called the model, naming the line of the ``eval()`` call
still in effect (the watcher notes where user code last put each module in eval mode).

Silent on: BatchNorm frozen on purpose (``model.train()`` then ``bn.eval()``: the model itself is in
training mode); models without Dropout/BatchNorm; eval-mode forwards with backward but no step on
the model's parameters (adversarial examples, saliency maps, style transfer optimising an image).

Cost: per checked outermost forward of a model in eval mode, one output followed (64 at most); at
the next optimizer step, one pass over the parameters of the models whose outputs a backward
reached.

Reference: ``torch.nn.Module.train`` docs
(https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.train); GitHub
HuiZeng/Grid-Anchor-based-Image-Cropping-Pytorch#2 (``net.eval()`` in the test function and no
``net.train()`` after it froze BatchNorm from the second epoch) and pytorch/tutorials#1624.
"""

from __future__ import annotations

import weakref
from typing import Any

from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.frames import short_location
from trainguard.sanitize.core.modes import describe, inactive
from trainguard.sanitize.core.records import ForwardCall, first_tensor
from trainguard.sanitize.core.state import GraphTrack


class TrainInEvalMode(Check):
    code = "TG102"
    on_demand = ("on_step_pre",)  # only while outputs of an eval-mode model are followed

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.pending: list[GraphTrack] = []

    def on_root_forward(self, call: ForwardCall) -> None:
        if call.training or not call.grad_enabled or not call.direct or self.state.in_backward:
            return
        frozen = inactive(call.module)
        if not frozen:
            return
        for tensor in first_tensor(call.output, limit=1):
            track = self.state.track_graph(
                tensor, info=(call.where, type(call.module).__name__, describe(frozen),
                              weakref.ref(call.module)))
            if track is not None:
                self.pending.append(track)
                self.arm()
        if len(self.pending) > 64:
            for t in self.pending[:-64]:
                t.release()
            del self.pending[:-64]

    def on_step_pre(self, optimizer: Any) -> None:
        self._settle(optimizer)
        if not self.pending:
            self.disarm()

    def _settle(self, optimizer: Any) -> None:
        if not self.pending:
            return
        reached = [t for t in self.pending if t.reached]
        if not reached:
            self.pending = [t for t in self.pending if t.alive]
            return
        stepped = {id(p) for g in optimizer.param_groups for p in g["params"]}
        for track in reached:
            where, name, frozen, model_ref = track.info
            model = model_ref()
            if model is not None and any(id(p) in stepped for p in model.parameters()):
                set_at = self.state.eval_at.get(id(model))
                since = (f"; eval() at {short_location(set_at[1])} is still in effect"
                         if set_at is not None and set_at[0]() is model and set_at[1] else "")
                self.report(
                    f"{name} is in eval mode (model.training=False; {frozen} in eval mode) during "
                    f"this training forward{since}: a backward reached its output and "
                    f"{type(optimizer).__name__}.step() updated its parameters, so BatchNorm "
                    "learns no batch statistics and Dropout does not regularise",
                    fix="call model.train() at the start of every training epoch (after any "
                        "model.eval() for validation)",
                    where=where)
            track.release()
        self.pending = [t for t in self.pending if t.active and t.alive]
