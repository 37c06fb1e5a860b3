"""Facts about PyTorch's API that the linter, the sanitizer and the instruments share.

Standard library only: ``trainguard lint`` imports this module and never imports torch.
"""

from __future__ import annotations

__all__ = ["FUNCTIONAL_LOSSES"]

FUNCTIONAL_LOSSES = (
    "cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
)
"""The ``torch.nn.functional`` losses trainguard knows by name
(https://pytorch.org/docs/stable/nn.functional.html#loss-functions): the sanitizer's functional
probe wraps them, and a call of one in the user's source counts as a loss."""
