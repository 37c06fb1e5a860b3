"""Where a model folded its batch into one row: the reshape that made a one-row output from a
batch of N samples (TG403).

A prediction of one row against a target of N rows broadcasts without an error in an elementwise
loss. When that prediction is the output of a model call given N samples, the model lost its
batch dimension, most often through ``x.view(-1, C * H * W)`` with a feature size larger than one
sample's, which folds the whole batch into one row. :func:`batch_fold` runs that call again
(:func:`~trainguard.sanitize.core.nonfinite.rerun`: no grad, RNG forked, buffers swapped for
copies, so nothing the user computes changes) under a bounded ``TorchFunctionMode`` that notes
the first op whose output holds as many elements as its first input, the input in ``batch``
rows and the output in ``rows``: a reshape that moved the samples out of the first dimension.

Cost: at a finding only, one forward of the model with a Python call per torch op (the first
20,000 followed).
"""

from __future__ import annotations

from typing import Any

from trainguard.sanitize.core.frames import Location
from trainguard.sanitize.core.nonfinite import rerun
from trainguard.sanitize.core.tracing import bounded_mode, op_name

__all__ = ["batch_fold"]

_OPS = 20_000


def _fold_mode(batch: int, rows: int) -> Any:
    import torch

    class Fold(bounded_mode()):
        limit = _OPS

        def __init__(self) -> None:
            super().__init__()
            self.found: tuple[str, tuple, tuple, Location | None] | None = None

        def _follow(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
            first = args[0] if args and isinstance(args[0], torch.Tensor) else None
            if first is None or not isinstance(out, torch.Tensor) or first.dim() < 2 or \
                    out.dim() < 1:
                return
            if first.shape[0] == batch and out.shape[0] == rows and \
                    out.numel() == first.numel():
                self.found = (op_name(func), tuple(first.shape), tuple(out.shape), self.caller())
                self.stop()

    return Fold()


def batch_fold(model: Any, args: list[Any], kwargs: dict[str, Any] | None, batch: int,
               rows: int) -> tuple[str, tuple, tuple, Location | None] | None:
    """``(op name, its input's shape, its output's shape, the user's line)`` of the first op in a
    re-run of ``model(*args, **kwargs)`` that turned ``batch`` rows into ``rows`` rows without
    changing the number of elements; None when there is none (or the re-run raised)."""
    fold = _fold_mode(batch, rows)
    rerun(model, args, kwargs, watch=fold)
    return fold.found
