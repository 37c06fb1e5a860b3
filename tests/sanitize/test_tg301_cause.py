"""TG301 is reported at the backward that added onto the previous step's gradients (the cause),
naming the step that used them; a declared accumulation marked on the step line stays silent, as
documented before the finding moved (pytorch/pytorch#47175 asks for exactly this opt-out)."""

from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F
from torch import nn

from sanitize_helpers import findings_of
from trainguard.sanitize.checks.tg301_grads_accumulate import GradsAccumulate


def _line_of(func, text: str) -> int:
    source, first = inspect.getsourcelines(func)
    return first + next(i for i, line in enumerate(source) if text in line)


def _never_zeroed() -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(4):
        F.cross_entropy(model(torch.randn(8, 4)), torch.randint(0, 2, (8,))).backward()
        optimizer.step()


def _declared_on_the_step_line() -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(4):
        F.cross_entropy(model(torch.randn(8, 4)), torch.randint(0, 2, (8,))).backward()
        optimizer.step()  # trainguard: ignore[TG301]


def test_reported_at_the_backward_naming_the_step():
    [finding] = findings_of(_never_zeroed, GradsAccumulate)
    assert finding.code == "TG301"
    assert finding.line == _line_of(_never_zeroed, ".backward()")
    step_line = _line_of(_never_zeroed, "optimizer.step()")
    assert f"at test_tg301_cause.py:{step_line} used gradients" in finding.message, finding.message
    assert finding.message.startswith("this backward added onto gradients")


def test_a_step_line_marked_as_declared_accumulation_stays_silent():
    assert findings_of(_declared_on_the_step_line, GradsAccumulate) == []
