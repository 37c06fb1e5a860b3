"""Monte Carlo dropout: repeated stochastic forwards of one input, told apart from an evaluation.

Keeping Dropout active at prediction time and averaging several forward passes of the same input
is a deliberate method (MC dropout; Gal and Ghahramani, "Dropout as a Bayesian Approximation",
ICML 2016, https://arxiv.org/abs/1506.02142). What sets it apart from an evaluation left in
training mode is its mechanism, not its names: the same input tensor, unchanged (the same object
at the same version counter), goes through the same model again from the same statement (the same
model call reached through the same user lines: a sampling loop or comprehension), with grad
disabled and no backward, mode change or optimizer step in between, while the only
mode-dependent modules active are dropout-type ones (Dropout, an RNN's or MultiheadAttention's
dropout). A BatchNorm left in training mode updates its running statistics on every such pass,
so a model with one stays reported, and so does a module whose own ``forward`` reads
``self.training`` (what it does is unknown). Two single passes made by different statements
(``estimate(model, image)`` called twice on one image, its outputs compared:
skhadem/3D-BoundingBox#29, the same image giving a different orientation each time) are two
evaluations, each reported.

TG101 hands such a forward's finding to :class:`Sampling` instead of reporting it at once; the
next event decides: a repeat of the same input drops it (and every repeat after it), anything
else reports it as it was.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any, Callable

from trainguard.sanitize.core.callstack import callers
from trainguard.sanitize.core.modes import rule_of

__all__ = ["Sampling", "dropout_only"]


def dropout_only(active: list[Any]) -> bool:
    """Whether every active mode-dependent module is a dropout (its rule's attribute is a drop
    probability: ``p`` or ``dropout``), none a norm layer or a module reading ``self.training``."""
    for m in active:
        rule = rule_of(m)
        if getattr(rule, "attribute", None) not in ("p", "dropout"):
            return False
    return bool(active)


def _input(call: Any) -> Any:
    """The call's first positional tensor argument, or None."""
    args = call.args
    first = args[0] if args else None
    return first if hasattr(first, "is_inference") else None


def _statement(call: Any) -> tuple:
    """The user line that made the model call and the user lines that called its function
    (:func:`~trainguard.sanitize.core.callstack.callers`): a draw of a series repeats all of
    them."""
    return call.where, callers(call.where, sys._getframe(1))


def _version(tensor: Any) -> int:
    """The tensor's version counter; -1 for an inference tensor (made under
    ``torch.inference_mode()``), which has none: reading it raises, and such a tensor is only
    changed in place inside inference mode, so its identity alone tells a repeat."""
    return -1 if tensor.is_inference() else tensor._version


class Sampling:
    """The latest no-grad forward of a dropout-only model in training mode, held until the next
    event shows whether it was one draw of several (silent) or a single pass (reported)."""

    __slots__ = ("held", "series")

    def __init__(self) -> None:
        # (model, input, input version, statement, report): the forward whose finding waits
        self.held: tuple[Any, Any, int, tuple, Callable[[], None]] | None = None
        # (model, input, input version, statement): a series already seen to repeat
        self.series: tuple[Any, Any, int, tuple] | None = None

    def offer(self, active: list[Any], call: Any, report: Callable[[], None]) -> None:
        """``report`` a no-grad forward's finding now, or, for a dropout-only model called with a
        tensor input, keep it until the next event."""
        tensor = _input(call) if dropout_only(active) else None
        if tensor is None:
            report()
            return
        self.release()
        self.held = (weakref.ref(call.module), weakref.ref(tensor), _version(tensor),
                     _statement(call), report)

    def repeats(self, call: Any) -> bool:
        """Whether ``call`` (a root forward) draws again from the held forward's input, or from a
        series seen to repeat. Any other forward reports the held finding."""
        if self.held is None and self.series is None:
            return False
        tensor = _input(call) if call.training and not call.grad_enabled else None
        for entry in (self.held, self.series):
            if entry is not None and tensor is not None and entry[0]() is call.module \
                    and entry[1]() is tensor and entry[2] == _version(tensor) \
                    and entry[3] == _statement(call):
                self.series, self.held = entry[:4], None
                return True
        self.series = None
        self.release()
        return False

    def release(self) -> None:
        """Report the held finding (a backward, a mode change, a step, the end of the run, or a
        forward that is not a repeat came first)."""
        held, self.held = self.held, None
        if held is not None:
            held[4]()
