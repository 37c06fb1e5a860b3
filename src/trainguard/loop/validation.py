"""Validation: loss and metrics of a model in ``eval()`` mode under ``torch.no_grad()``."""

from __future__ import annotations

from typing import Callable, Iterable, Mapping

import torch
from torch import nn

from trainguard.loop.device import resolve_device, split_batch, to_device
from trainguard.loop.metrics import Metric, MetricSums
from trainguard.loop.precision import Amp, Precision

__all__ = ["evaluate", "validation_sums"]


def evaluate(model: nn.Module, loader: Iterable, loss_fn: Callable[..., torch.Tensor], *,
             device: str | torch.device = "auto", metrics: Mapping[str, Metric] | None = None,
             precision: Precision = "32") -> dict[str, float]:
    """Validation metrics of ``model`` over ``loader`` in ``eval()`` mode under ``no_grad``.

    The model's previous mode is restored afterwards. Losses and metrics are averaged over samples
    (each batch weighted by its size; ``loss_fn`` should return a batch mean, PyTorch's default
    ``reduction="mean"``).

    Returns:
        ``{"loss": ..., "accuracy": ... (class outputs only), <metric>: ...}``.

    Example::

        metrics = trainguard.evaluate(model, val_loader, torch.nn.CrossEntropyLoss())
    """
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            sums = validation_sums(model, loader, loss_fn, device=resolve_device(device),
                                   metrics=metrics, precision=precision)
    finally:
        model.train(was_training)
    return sums.means()


def validation_sums(model: Callable[..., torch.Tensor], loader: Iterable,
                    loss_fn: Callable[..., torch.Tensor], *, device: torch.device,
                    metrics: Mapping[str, Metric] | None, precision: Precision) -> MetricSums:
    """Sample-weighted sums of the loss and metrics over ``loader``, kept on the device.

    The caller puts the model in ``eval()`` mode and disables gradients (see :func:`evaluate`).
    """
    amp = Amp(device, precision)
    sums = MetricSums(metrics or {})
    for batch in loader:
        inputs, targets = to_device(split_batch(batch), device)
        with amp.autocast():
            outputs = model(inputs)
            loss = loss_fn(outputs, targets)
        sums.update(loss, outputs, targets)
    return sums
