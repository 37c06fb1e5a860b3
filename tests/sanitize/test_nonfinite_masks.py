"""The re-run that names the op making a loss non-finite passes over a deliberate mask:
``logits.masked_fill(~allowed, float("-inf"))`` makes infinities on purpose (a restricted
vocabulary, a causal mask), so it is not named as the op that made NaN/Inf from finite inputs;
a log of zero still is."""

from __future__ import annotations

import torch
from torch import nn

from trainguard.sanitize.core.nonfinite import rerun


class Masked(nn.Module):
    def __init__(self, log_of_zero: bool = False) -> None:
        super().__init__()
        self.head = nn.Linear(4, 6)
        self.allowed = torch.tensor([True, True, False, True, False, True])
        self.log_of_zero = log_of_zero

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.head(x).masked_fill(~self.allowed, float("-inf"))
        if self.log_of_zero:
            logits = logits + torch.log(torch.zeros_like(logits))
        return logits


def test_an_explicit_infinity_mask_is_not_the_non_finite_op():
    torch.manual_seed(0)
    found = rerun(Masked(), [torch.randn(2, 4)])
    assert found.op is None


def test_a_log_of_zero_after_the_mask_is_still_named():
    torch.manual_seed(0)
    found = rerun(Masked(log_of_zero=True), [torch.randn(2, 4)])
    assert found.op is not None and found.op[0] == "log"
