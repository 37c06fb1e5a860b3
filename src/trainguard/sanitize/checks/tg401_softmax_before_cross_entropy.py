"""TG401 softmax-before-cross-entropy: probabilities fed to a loss that expects logits or log-probs.

What it watches: every ``CrossEntropyLoss``/``F.cross_entropy`` and ``NLLLoss``/``F.nll_loss`` call:
the autograd node that made its input (one attribute read, no values, no sync); when the input has
no ``grad_fn`` (a validation loss under ``torch.no_grad()``), its values, on the CPU only.

When it fires: the input was made by ``softmax`` (``F.softmax``, ``nn.Softmax``, ``Tensor.softmax``),
possibly through a reshape, a dtype cast or an index that picks some of its rows
(``softmax(x)[keep]``); or, without a ``grad_fn``, it holds probabilities: two or
more classes along dim 1, every value in [0, 1], every row summing to 1 (within 1e-3), and not
every value exactly 0 or 1 (one-hot rows: a softmax never gives exact zeros, so they are built,
e.g. to compute the floor a perfect prediction reaches, not a model's output).
``cross_entropy`` applies ``log_softmax`` itself, so the model is trained through two softmaxes
and its gradients shrink; ``nll_loss`` expects log-probabilities, so on probabilities it is not a
likelihood at all. Reported at the cause: after the first sighting, a window (``core/origin.py``)
notes where softmax outputs are made until the next such loss call, which is then reported at the
line that called softmax or an ``nn.Softmax`` module (``self.softmax(x)``), or, when library code
called the module (an ``nn.Sequential``), at the line that built it; the loss line is in the
message (at the loss line when the run ends first). An input without a ``grad_fn`` that the
value test found is located by the address of its storage, which its views share, at the softmax
when the loss's own function made it, else at the loss line (a ``predict_proba``'s output is
right where it is made).

Silent on: logits, ``log_softmax`` output, ``torch.log(softmax(x))`` for ``NLLLoss``, softmax used
for the *target* (distillation), log-probabilities or logits under ``torch.no_grad()``.

Cost: per checked loss call, one look at its input's ``grad_fn``; without one, a min, max and row
sum of the input on the CPU (skipped on other devices and past 1,000,000 values). After a finding,
one Python call per torch function until the next such loss call.

Reference: ``CrossEntropyLoss`` docs ("The input is expected to contain the unnormalized logits")
https://pytorch.org/docs/stable/generated/torch.nn.CrossEntropyLoss.html;
https://jamesmccaffreyblog.com/2020/06/11/pytorch-crossentropyloss-vs-nllloss-cross-entropy-loss-vs-negative-log-likelihood-loss/.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from trainguard.sanitize.core.callstack import user_stack
from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.origin import Origin, Pending, storage_key
from trainguard.sanitize.core.producer import producer_node, shape
from trainguard.sanitize.core.values import READ_NOW, reading

_CE = ("CrossEntropyLoss", "cross_entropy")
_NLL = ("NLLLoss", "nll_loss")
_VALUES = 1_000_000  # most values read by the test for probabilities


class SoftmaxBeforeCrossEntropy(Check):
    code = "TG401"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        import torch
        import torch.nn.functional as F

        self.built: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self.kinds = (torch.nn.Softmax, torch.nn.Softmax2d)
        origin = Origin(((F, "softmax"), (torch, "softmax"), (torch.Tensor, "softmax"),
                         (torch.special, "softmax")),
                        self.built.get)
        self.pending = Pending(origin, self.report, self.hold)

    def on_built(self, obj: Any, where: Any) -> None:
        if isinstance(obj, self.kinds) and where is not None:
            self.built[obj] = where

    def on_loss(self, call: Any) -> None:
        name = call.name
        if (name not in _CE and name not in _NLL):
            return
        node = producer_node(call.input)
        if node is not None:
            if not type(node).__name__.startswith("SoftmaxBackward"):
                return
            made = "made by softmax"
        elif _probabilities(call.input):
            made = "holding probabilities (every row sums to 1)"
        else:
            return
        if name in _CE:
            message = (f"{name} got an input of shape {shape(call.input)} {made}: it applies "
                       "log_softmax itself, so the probabilities go through a second softmax and "
                       "the gradients shrink (training stalls, the loss floors above zero)")
            fix = "pass the raw logits to the loss and apply softmax only for predictions"
        else:
            message = (f"{name} got an input of shape {shape(call.input)} {made}: it expects "
                       "log-probabilities, so on probabilities it is not a log-likelihood")
            fix = "use log_softmax before NLLLoss, or pass logits to CrossEntropyLoss"
        if node is not None:
            self.pending.found(node, message, fix, call.where)
        else:  # without a graph (a validation loss under no_grad): located by its memory
            self.pending.found(storage_key(call.input), message, fix, call.where,
                               used_stack=user_stack(sys._getframe()))

    def on_exit(self) -> None:
        self.pending.flush()

    def release(self) -> None:
        self.pending.origin.stop()


def _probabilities(given: Any) -> bool:
    """Whether a loss input without a graph holds probabilities along dim 1 (CPU only)."""
    import torch

    if not isinstance(given, torch.Tensor) or not given.is_floating_point() or given.dim() < 2 \
            or given.shape[1] < 2 or given.numel() > _VALUES or reading(given) != READ_NOW:
        return False
    if float(given.min()) < 0.0 or float(given.max()) > 1.0:
        return False
    sums = given.sum(dim=1)
    if not bool(((sums - 1.0).abs() <= 1e-3).all()):
        return False
    # Exact one-hot rows are made, not predicted (a softmax is never exactly 0): a reference
    # value such as the loss floor of a perfect prediction, not a model's output.
    return not bool(((given == 0) | (given == 1)).all())
