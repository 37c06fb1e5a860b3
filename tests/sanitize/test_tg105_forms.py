"""TG105's forms: functional dropout that stays on in eval mode, however it is written
(``F.dropout(x, p, True)``, ``torch.dropout(x, p, True)``, ``F.alpha_dropout``, attention dropout
through ``F.scaled_dot_product_attention``: pytorch/pytorch#124464), and the look-alikes that stay
silent (a flag that follows the mode, ``training=True`` by name, MC dropout in training mode,
``p == 0``, ``nn.MultiheadAttention``)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from sanitize_helpers import findings_of
from trainguard.sanitize.checks.tg105_functional_dropout_ignores_mode import (
    FunctionalDropoutIgnoresMode)


class Block(nn.Module):
    def __init__(self, form: str) -> None:
        super().__init__()
        self.form, self.p, self.mc = form, 0.3, True
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, p = self.lin(x), self.p
        if self.form == "positional-true":
            return F.dropout(h, p, True)
        if self.form == "torch-true":
            return torch.dropout(h, p, True)
        if self.form == "torch-train-keyword":
            return torch.feature_dropout(h.unsqueeze(-1), p, train=True)
        if self.form == "alpha-default":
            return F.alpha_dropout(h, p)
        if self.form == "sdpa":
            q = h.view(4, 1, 4, 2)
            return F.scaled_dot_product_attention(q, q, q, dropout_p=p)
        if self.form == "follows-mode":
            return F.dropout(h, p, self.training) + torch.dropout(h, p, self.training)
        if self.form == "keyword-true":
            return F.dropout(h, p=p, training=True)  # stated on purpose (Tacotron 2's pre-net)
        if self.form == "mc-switch":
            return F.dropout(h, p, self.mc)  # a flag set at run time
        if self.form == "p-zero":
            return F.dropout(h, 0.0) + F.scaled_dot_product_attention(
                h.view(4, 1, 4, 2), h.view(4, 1, 4, 2), h.view(4, 1, 4, 2), dropout_p=0.0).sum()
        if self.form == "sdpa-guarded":
            q = h.view(4, 1, 4, 2)
            return F.scaled_dot_product_attention(q, q, q, dropout_p=p if self.training else 0.0)
        raise ValueError(self.form)


def _eval_forward(form: str, *, train_mode: bool = False) -> list:
    block = Block(form).train(train_mode)
    return findings_of(lambda: block(torch.randn(4, 8)), FunctionalDropoutIgnoresMode)


@pytest.mark.parametrize("form", ["positional-true", "torch-true", "torch-train-keyword",
                                  "alpha-default", "sdpa"])
def test_dropout_on_whatever_the_mode_is_reported_in_eval_mode(form):
    (finding,) = _eval_forward(form)
    assert finding.code == "TG105" and "Block.forward" in finding.message
    assert "eval mode" in finding.message


@pytest.mark.parametrize("form", ["follows-mode", "mc-switch", "p-zero", "sdpa-guarded"])
def test_look_alikes_in_eval_mode_are_silent(form):
    assert _eval_forward(form) == []


def test_keyword_true_in_a_sub_module_is_a_stated_choice():
    """A pre-net inside the evaluated model (Tacotron 2 keeps its dropout on at inference)."""
    model = nn.Sequential(Block("keyword-true"), nn.Linear(8, 2)).eval()
    assert findings_of(lambda: model(torch.randn(4, 8)), FunctionalDropoutIgnoresMode) == []


def test_keyword_true_in_the_evaluated_model_is_reported_at_its_line():
    """The evaluated model's own forward keeps dropout on, each input seen once
    (Coderx7/SimpleNet#2): reported when the run ends, at the dropout's line."""
    block = Block("keyword-true").eval()
    (finding,) = findings_of(lambda: [block(torch.randn(4, 8)) for _ in range(3)],
                             FunctionalDropoutIgnoresMode)
    assert "training=True" in finding.message and "Block" in finding.message
    assert finding.line == Block.forward.__code__.co_firstlineno + 16


def test_monte_carlo_passes_over_the_same_input_are_silent():
    """MC dropout: model.eval() (BatchNorm frozen), the same batch sampled several times."""
    block, x = Block("keyword-true").eval(), torch.randn(4, 8)
    assert findings_of(lambda: torch.stack([block(x) for _ in range(5)]).mean(0),
                       FunctionalDropoutIgnoresMode) == []


@pytest.mark.parametrize("form", ["positional-true", "torch-true", "sdpa", "alpha-default"])
def test_training_mode_is_silent(form):
    assert _eval_forward(form, train_mode=True) == []


def test_multihead_attention_in_eval_mode_is_silent():
    mha = nn.MultiheadAttention(8, 2, dropout=0.5).eval()
    x = torch.randn(3, 2, 8)
    assert findings_of(lambda: mha(x, x, x), FunctionalDropoutIgnoresMode) == []


def test_dynamo_still_knows_the_dropout_builtins_when_its_table_is_built_during_a_watch():
    # Dynamo resolves "torch.dropout" once, on its first compile: resolved to the wrapper, the
    # builtin (which F.dropout calls through torch._VF) would break every compiled graph
    from torch._dynamo import trace_rules

    from trainguard.sanitize.watcher import Watcher

    table = trace_rules.get_torch_obj_rule_map
    watcher = Watcher(stream=None).start()
    try:
        assert torch.dropout is not torch._C._VariableFunctions.dropout  # wrapped
        table.cache_clear()
        known = table()
        assert torch._C._VariableFunctions.dropout in known
        assert torch._C._VariableFunctions.alpha_dropout in known
    finally:
        watcher.stop()
        table.cache_clear()
