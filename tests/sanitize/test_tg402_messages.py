"""TG402's message for float targets of the input's shape given to CrossEntropyLoss: the range of
the row sums (not a tolerance), and multi-hot rows named as multi-label targets, with
BCEWithLogitsLoss as the fix (forum: "CrossEntropyLoss for multi-label classification",
https://discuss.pytorch.org/t/is-there-an-example-for-multi-class-multilabel-classification-in-pytorch/53579)."""

from __future__ import annotations

import torch
from torch import nn

from sanitize_helpers import findings_of
from trainguard.sanitize.checks.tg402_label_dtype import LabelDtype


def _finding(target: torch.Tensor):
    def run() -> None:
        logits = torch.randn(*target.shape, requires_grad=True)
        nn.CrossEntropyLoss()(logits, target).backward()

    return findings_of(run, LabelDtype)


def test_multi_hot_rows_are_named_multi_label_with_bce_as_the_fix():
    target = torch.tensor([[1.0, 0, 1, 1], [0, 0, 0, 0], [0, 1, 0, 0]])
    [finding] = _finding(target)
    assert "row sums from 0 to 3" in finding.message, finding.message
    assert "multi-label targets" in finding.message and "+/-" not in finding.message
    assert finding.fix.startswith("for multi-label targets use BCEWithLogitsLoss")


def test_soft_targets_that_do_not_sum_to_one_keep_the_normalize_fix():
    target = torch.tensor([[0.5, 0.3, 0.4], [0.2, 0.2, 0.2]])
    [finding] = _finding(target)
    assert "row sums from 0.6 to 1.2" in finding.message, finding.message
    assert "multi-label" not in finding.message
    assert "normalize the soft targets" in finding.fix


def test_probability_rows_are_silent():
    assert _finding(torch.softmax(torch.randn(4, 3), dim=1)) == []
