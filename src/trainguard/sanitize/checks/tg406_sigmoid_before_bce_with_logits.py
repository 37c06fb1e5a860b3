"""TG406 sigmoid-before-bce-with-logits: probabilities fed to a loss that applies the sigmoid itself.

What it watches: every ``BCEWithLogitsLoss``/``F.binary_cross_entropy_with_logits`` call: the
autograd node that made its input (one attribute read, no values, no sync).

When it fires: the input was made by ``sigmoid`` (``torch.sigmoid``, ``nn.Sigmoid``,
``Tensor.sigmoid``), possibly through a reshape, a dtype cast or an index (``sigmoid(x)[mask]``).
The loss then computes
``sigmoid(sigmoid(x))``, which lies in (0.5, 0.73): a prediction can never be confidently negative
and the gradients vanish. Reported at the cause: after the first sighting, a window
(``core/origin.py``) notes where sigmoid outputs are made until the next such loss call, which is
then reported at the line that called sigmoid or an ``nn.Sigmoid`` module (``self.act(x)``), or,
when library code called the module (an ``nn.Sequential``), at the line that built it; an
``nn.Sigmoid`` called once by its class is reported where it is built, unless the calling method
reads its output more than once (it also feeds another layer): then at the call. The loss line is
in the message (at the loss line when the run ends first).
When the loss's input is a name that other statements of the function read too (a focal loss's
``probs``, also used for ``p_t``), the probabilities are needed: the loss call is reported (reads
that apply a sigmoid again, there or in a same-file helper, are not uses; not
when the name says logits, ``y_logits``: its author meant raw scores, so the sigmoid is the fix;
nor when the sigmoid rebound the name that held the logits, ``x = torch.sigmoid(x)``: no later
line can give the loss the logits, so the sigmoid is reported, itakurah/focal-loss-pytorch#5).

Silent on: logits; ``sigmoid`` output given to ``BCELoss`` (that is its contract); losses computed
under ``torch.no_grad()`` (no ``grad_fn`` to read).

Cost: per checked loss call, one look at its input's ``grad_fn``. After a finding, one Python
call per torch function until the next such loss call.

Reference: ``BCEWithLogitsLoss`` docs ("combines a Sigmoid layer and the BCELoss in one single
class") https://pytorch.org/docs/stable/generated/torch.nn.BCEWithLogitsLoss.html; GitHub issue
https://github.com/lopuhin/kaggle-imet-2019/issues/3.
"""

from __future__ import annotations

import weakref
from typing import Any

from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.origin import Origin, Pending
from trainguard.sanitize.core.producer import producer_node, shape
from trainguard.sanitize.core.loss_input import rebound_by_sigmoid, reused_input

_NAMES = ("BCEWithLogitsLoss", "binary_cross_entropy_with_logits")


class SigmoidBeforeBCEWithLogits(Check):
    code = "TG406"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        import torch

        self.built: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        origin = Origin(((torch, "sigmoid"), (torch.Tensor, "sigmoid"), (torch.special, "expit"),
                         (torch.nn.functional, "sigmoid")), self.built.get)
        self.pending = Pending(origin, self.report, self.hold)

    def on_built(self, obj: Any, where: Any) -> None:
        import torch

        if isinstance(obj, torch.nn.Sigmoid) and where is not None:
            self.built[obj] = where

    def on_loss(self, call: Any) -> None:
        if call.name not in _NAMES:
            return
        node = producer_node(call.input)
        if node is None or not type(node).__name__.startswith("SigmoidBackward"):
            return
        reused = reused_input(call.where)
        if reused is not None:  # the probabilities serve other code too: the loss is the fix
            self.report(
                f"{call.name} got `{reused}`, made by sigmoid, which the loss applies again: "
                "its predictions stay within (0.5, 0.73) and the gradients vanish; the "
                f"probabilities in `{reused}` are used by other code too, so this call is what "
                "to change",
                fix="pass the raw logits (the sigmoid's input) to this loss and keep "
                    f"`{reused}` for the rest", where=call.where)
            return
        self.pending.found(
            node,
            f"{call.name} got an input of shape {shape(call.input)} made by sigmoid: the loss "
            "applies the sigmoid again, so its predictions stay within (0.5, 0.73) and the "
            "gradients vanish",
            _fix(rebound_by_sigmoid(call.where)), call.where)

    def on_exit(self) -> None:
        self.pending.flush()

    def release(self) -> None:
        self.pending.origin.stop()


def _fix(rebound: str | None) -> str:
    """The advice at the sigmoid; when it rebinds the logits' own name, that name is read as
    probabilities elsewhere too, so dropping the sigmoid would change that other code."""
    if rebound is None:
        return ("pass the raw logits to BCEWithLogitsLoss (drop the sigmoid), or keep the sigmoid "
                "and use BCELoss")
    return (f"bind the probabilities to a new name (`probs = torch.sigmoid({rebound})`), read "
            f"`probs` where probabilities are meant, and give the loss `{rebound}` (the logits)")
