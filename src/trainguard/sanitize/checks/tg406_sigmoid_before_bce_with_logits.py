"""TG406 sigmoid-before-bce-with-logits: probabilities fed to a loss that applies the sigmoid itself.

What it watches: every ``BCEWithLogitsLoss``/``F.binary_cross_entropy_with_logits`` call: the
autograd node that made its input (one attribute read, no values, no sync).

When it fires: the input was made by ``sigmoid`` (``torch.sigmoid``, ``nn.Sigmoid``,
``Tensor.sigmoid``), possibly through a reshape or dtype cast. The loss then computes
``sigmoid(sigmoid(x))``, which lies in (0.5, 0.73): a prediction can never be confidently negative
and the gradients vanish.

Silent on: logits; ``sigmoid`` output given to ``BCELoss`` (that is its contract); losses computed
under ``torch.no_grad()`` (no ``grad_fn`` to read).

Cost: per checked loss call, one look at its input's ``grad_fn``.

Reference: ``BCEWithLogitsLoss`` docs ("combines a Sigmoid layer and the BCELoss in one single
class") https://pytorch.org/docs/stable/generated/torch.nn.BCEWithLogitsLoss.html; GitHub issue
https://github.com/lopuhin/kaggle-imet-2019/issues/3.
"""

from __future__ import annotations

from typing import Any

from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.producer import producer, shape

_NAMES = ("BCEWithLogitsLoss", "binary_cross_entropy_with_logits")


class SigmoidBeforeBCEWithLogits(Check):
    code = "TG406"

    def on_loss(self, call: Any) -> None:
        if call.name not in _NAMES:
            return
        made_by = producer(call.input)
        if made_by is None or not made_by.startswith("SigmoidBackward"):
            return
        self.report(
            f"{call.name} got an input of shape {shape(call.input)} made by sigmoid: the loss "
            "applies the sigmoid again, so its predictions stay within (0.5, 0.73) and the "
            "gradients vanish",
            fix="pass the raw logits to BCEWithLogitsLoss (drop the sigmoid), or keep the sigmoid "
                "and use BCELoss",
            where=call.where)
