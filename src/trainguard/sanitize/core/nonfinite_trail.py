"""Where a NaN/Inf constant of a loss came from, within one traced cycle (TG405).

A loss can turn NaN through a factor that needs no gradient (``alpha * loss_i`` with weights
computed from detached running statistics, ``u * torch.log(t)`` of data holding 0): the
``MulBackward0`` node saves the factor, but autograd records nothing of how it was made. While
:mod:`~trainguard.sanitize.core.node_lines` traces the next cycle, :class:`Trail` notes each op
output that needs no gradient and holds NaN/Inf: the op, the user's line that called it, and
which of its inputs were non-finite. From the factor, the trail is followed back through the
ops of the cycle that made its non-finite inputs, to the first of them: an op that made NaN/Inf
from finite inputs (``0 / 0``, ``log(0)``: the cause), or one whose non-finite inputs were
already so when the cycle began (state kept across steps: running statistics, a buffer; or the
batch), which is where the non-finite value enters the step.

Outputs are keyed by their memory and shape (a factor unpacked from a node is a new Python
object over the same memory) and by their order: an input is followed only to an output made
before the op that read it, so memory reused later in the cycle is never taken for it.

Cost: only in the one traced cycle after a finding; per op output that needs no gradient, one
``isfinite`` test (CPU floating tensors); per non-finite one, one test of each input.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Trail"]

_NOTES = 4096  # non-finite outputs noted at most
_STEPS = 64  # ops followed back at most


def _key(t: Any) -> tuple[int, tuple[int, ...]]:
    return t.data_ptr(), tuple(t.shape)


def _non_finite(t: Any) -> bool:
    import torch

    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.device.type == "cpu" \
        and t.layout == torch.strided and bool(t.numel()) and not bool(torch.isfinite(t).all())


class Trail:
    """The non-finite outputs that need no gradient of one cycle's ops (see the module doc)."""

    def __init__(self) -> None:
        self.seq = 0
        self.notes: dict[tuple, tuple[int, str, Any, tuple]] = {}  # key -> (seq, op, line, inputs)

    def note(self, op: str, inputs: list[Any], outs: list[Any], where: Any) -> None:
        """After op ``op`` (called at ``where``) took ``inputs`` (tensors) and made ``outs``."""
        self.seq += 1
        for t in outs:
            try:
                if t.grad_fn is None and len(self.notes) < _NOTES and _non_finite(t):
                    bad = tuple(_key(a) for a in inputs if a is not t and _non_finite(a))
                    self.notes[_key(t)] = (self.seq, op, where, bad)
            except Exception:  # (a sparse or storage-less tensor: not followed)
                continue

    def origin(self, factor: Any) -> tuple[str, Any, bool] | None:
        """``(op, line, made from finite inputs)`` of the first op of the cycle on the trail of
        the non-finite tensor ``factor``; None when no op of the cycle made it."""
        try:
            note = self.notes.get(_key(factor))
        except Exception:  # (a tensor without storage)
            return None
        for _ in range(_STEPS):
            if note is None:
                return None
            seq, op, where, bad = note
            earlier = next((n for n in (self.notes.get(k) for k in bad)
                            if n is not None and n[0] < seq), None)
            if earlier is None:
                return op, where, not bad
            note = earlier
        return None

    def clear(self) -> None:
        self.notes.clear()
