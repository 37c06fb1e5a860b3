"""Mixed precision: autocast for the forward and, with fp16 on CUDA, a ``GradScaler``.

PyTorch's recipe (https://pytorch.org/docs/stable/notes/amp_examples.html): forward and loss
under ``torch.autocast``, ``backward()`` outside it on the scaled loss, ``scaler.unscale_`` before
clipping so that the clip sees the true gradients, ``scaler.step`` and ``scaler.update``.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterable, Literal

import torch
from torch import nn

__all__ = ["Precision", "Amp"]

Precision = Literal["32", "bf16", "fp16"]

_NULL = contextlib.nullcontext()  # reusable: one object for every float32 step


class Amp:
    """Autocast and gradient scaling for one run.

    Args:
        device: where the model trains.
        precision: ``"32"`` (nothing changes), ``"bf16"`` (autocast) or ``"fp16"`` (autocast, and
            a ``GradScaler`` on CUDA).
    """

    def __init__(self, device: torch.device, precision: Precision) -> None:
        self.dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        self.device_type = device.type
        use_scaler = precision == "fp16" and device.type == "cuda"
        self.scaler = torch.amp.GradScaler("cuda") if use_scaler else None

    def autocast(self) -> Any:
        """The context the forward and the loss run in."""
        if self.dtype is None:
            return _NULL
        return torch.autocast(device_type=self.device_type, dtype=self.dtype)

    def backward(self, loss: torch.Tensor) -> None:
        """``loss.backward()``, on the scaled loss with fp16."""
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def clip(self, optimizer: torch.optim.Optimizer, parameters: Iterable[nn.Parameter],
             max_norm: float | None) -> None:
        """Clip the global gradient norm to ``max_norm`` (after unscaling); ``None``: no clip."""
        if max_norm is None:
            return
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
        nn.utils.clip_grad_norm_(parameters, max_norm)

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        """``optimizer.step()``; with fp16 ``scaler.step`` (skipped on inf/NaN) and ``update``."""
        if self.scaler is None:
            optimizer.step()
            return
        self.scaler.step(optimizer)
        self.scaler.update()

