"""TG401 softmax-before-cross-entropy: probabilities fed to a loss that expects logits or log-probs.

What it watches: every ``CrossEntropyLoss``/``F.cross_entropy`` and ``NLLLoss``/``F.nll_loss`` call:
the autograd node that made its input (one attribute read, no values, no sync).

When it fires: the input was made by ``softmax`` (``F.softmax``, ``nn.Softmax``, ``Tensor.softmax``),
possibly through a reshape or dtype cast. ``cross_entropy`` applies ``log_softmax`` itself, so the
model is trained through two softmaxes and its gradients shrink; ``nll_loss`` expects
log-probabilities, so on probabilities it is not a likelihood at all.

Silent on: logits, ``log_softmax`` output, ``torch.log(softmax(x))`` for ``NLLLoss``, softmax used
for the *target* (distillation), and losses computed under ``torch.no_grad()`` (no ``grad_fn`` to
read; the training loss is checked).

Cost: per checked loss call, one look at its input's ``grad_fn``.

Reference: ``CrossEntropyLoss`` docs ("The input is expected to contain the unnormalized logits")
https://pytorch.org/docs/stable/generated/torch.nn.CrossEntropyLoss.html;
https://jamesmccaffreyblog.com/2020/06/11/pytorch-crossentropyloss-vs-nllloss-cross-entropy-loss-vs-negative-log-likelihood-loss/.
"""

from __future__ import annotations

from typing import Any

from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.producer import producer, shape

_CE = ("CrossEntropyLoss", "cross_entropy")
_NLL = ("NLLLoss", "nll_loss")


class SoftmaxBeforeCrossEntropy(Check):
    code = "TG401"

    def on_loss(self, call: Any) -> None:
        name = call.name
        if name not in _CE and name not in _NLL:
            return
        made_by = producer(call.input)
        if made_by is None or not made_by.startswith("SoftmaxBackward"):
            return
        if name in _CE:
            self.report(
                f"{name} got an input of shape {shape(call.input)} made by softmax: it applies "
                "log_softmax itself, so the probabilities go through a second softmax and the "
                "gradients shrink (training stalls, the loss floors above zero)",
                fix="pass the raw logits to the loss and apply softmax only for predictions",
                where=call.where)
        else:
            self.report(
                f"{name} got an input of shape {shape(call.input)} made by softmax: it expects "
                "log-probabilities, so on probabilities it is not a log-likelihood",
                fix="use log_softmax before NLLLoss, or pass logits to CrossEntropyLoss",
                where=call.where)
