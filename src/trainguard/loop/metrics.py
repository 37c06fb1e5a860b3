"""Metrics accumulated on the device, without graphs and without a host sync per batch."""

from __future__ import annotations

from typing import Callable, Mapping

import torch

__all__ = ["accuracy", "MetricSums", "Metric"]

Metric = Callable[[torch.Tensor, torch.Tensor], "torch.Tensor | float"]


def accuracy(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Fraction of rows whose largest logit is the target class.

    Shape:
        - outputs: ``(N, K)`` logits or probabilities
        - targets: ``(N,)`` integer class indices
        - returns: scalar tensor in ``[0, 1]``
    """
    return (outputs.argmax(dim=1) == targets).float().mean()


def is_classification(outputs: torch.Tensor, targets: torch.Tensor) -> bool:
    """Outputs ``(N, K)`` and integer targets ``(N,)``: the built-in accuracy applies."""
    return (outputs.ndim == 2 and targets.ndim == 1 and outputs.shape[0] == targets.shape[0]
            and not targets.is_floating_point() and not targets.is_complex())


class MetricSums:
    """Sample-weighted sums of per-batch values, kept as device tensors until :meth:`means`."""

    def __init__(self, metrics: Mapping[str, Metric]) -> None:
        self.metrics = dict(metrics)
        self.sums: dict[str, torch.Tensor] = {}
        self.count = 0

    def add(self, name: str, value: torch.Tensor | float, n: int) -> None:
        v = value.detach().float() * n if isinstance(value, torch.Tensor) else float(value) * n
        self.sums[name] = self.sums[name] + v if name in self.sums else v

    def update(self, loss: torch.Tensor, outputs: torch.Tensor, targets: torch.Tensor) -> None:
        n = int(targets.shape[0]) if isinstance(targets, torch.Tensor) and targets.ndim else 1
        self.count += n
        self.add("loss", loss, n)
        if isinstance(outputs, torch.Tensor) and isinstance(targets, torch.Tensor) \
                and is_classification(outputs, targets):
            # the count of correct rows, exact (float32 holds integers up to 2**24): the epoch's
            # accuracy is then correct / samples, the number a prediction run reproduces
            correct = (outputs.argmax(dim=1) == targets).sum().float()
            self.sums["accuracy"] = self.sums["accuracy"] + correct if "accuracy" in self.sums \
                else correct
        for name, fn in self.metrics.items():
            self.add(name, fn(outputs, targets), n)

    def means(self) -> dict[str, float]:
        """One host sync for all metrics: ``{name: sum / count}``."""
        if not self.count:
            return {}
        names = list(self.sums)
        values = [self.sums[k] for k in names]
        if all(isinstance(v, torch.Tensor) for v in values):
            stacked = torch.stack([v.to(values[0].device) for v in values]).cpu().tolist()
        else:
            stacked = [float(v) for v in values]
        return {k: v / self.count for k, v in zip(names, stacked)}
