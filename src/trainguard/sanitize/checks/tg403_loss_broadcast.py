"""TG403 loss-broadcast: an elementwise loss whose input and target broadcast to a larger shape.

What it watches: every ``MSELoss``/``L1Loss``/``SmoothL1Loss``/``HuberLoss`` call and their
functional forms: the two shapes (no values, no sync).

When it fires: the shapes differ and broadcasting them gives more elements than either has
(``(N, 1)`` against ``(N,)`` gives ``(N, N)``): the loss averages every prediction against every
target. PyTorch only warns ("Using a target size ... that is different to the input size"), and the
warning is easy to miss in a log.

Silent on: equal shapes; a target that broadcasts into the input without growing it (a scalar
target); ``BCELoss``/``BCEWithLogitsLoss``, which raise on a size mismatch themselves.

Reference: ``MSELoss`` docs (input and target of the same shape)
https://pytorch.org/docs/stable/generated/torch.nn.MSELoss.html; GitHub issue
https://github.com/deepset-ai/FARM/issues/229.
"""

from __future__ import annotations

from math import prod
from typing import Any

from trainguard.sanitize.checks import Check

_NAMES = ("MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss",
          "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss")


class LossBroadcast(Check):
    code = "TG403"

    def on_loss(self, call: Any) -> None:
        if call.name not in _NAMES:
            return
        a, b = getattr(call.input, "shape", None), getattr(call.target, "shape", None)
        if a is None or b is None or a == b:
            return
        import torch

        try:
            both = torch.broadcast_shapes(a, b)
        except RuntimeError:
            return  # PyTorch raises its own error
        if prod(both) <= max(prod(a), prod(b)):
            return
        self.report(
            f"{call.name} input {tuple(a)} and target {tuple(b)} broadcast to {tuple(both)}: the "
            f"loss compares every prediction with every target ({prod(both)} pairs instead of "
            f"{max(prod(a), prod(b))}), so it trains towards the mean target",
            fix="give input and target the same shape, e.g. output.squeeze(-1) or "
                "target.unsqueeze(-1)",
            where=call.where)
