"""trainguard.apifacts: the one definition of mode-dependent modules, checked against PyTorch.

Each rule is tested differentially: the module built with the rule's attribute on (and at its
default) runs in train and in eval mode on the same input, and the outputs differ exactly when the
rule says the module depends on the mode.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

from trainguard.apifacts import MODE_CLASSES, MODE_RULES, mode_rule, training_read_matters
from trainguard.sanitize.core.modes import describe, mode_dependent


def _build(name: str, **kwargs) -> tuple[nn.Module, tuple]:
    """A small module of class ``name`` and an input for it."""
    cls = getattr(nn, name)
    if name.startswith(("Dropout", "AlphaDropout", "FeatureAlphaDropout")):
        dims = {"Dropout2d": (4, 3, 5, 5), "Dropout3d": (4, 3, 3, 3, 3)}.get(name, (4, 8, 6))
        return cls(**kwargs), (torch.randn(*dims),)
    if "Norm" in name:
        dims = {"1": (4, 3, 10), "2": (4, 3, 5, 5), "3": (4, 3, 3, 3, 3)}[name[-2]]
        module = cls(3, **kwargs) if not name.startswith("Lazy") else cls(**kwargs)
        return module, (torch.randn(*dims) * 3 + 1,)
    if name in ("RNN", "LSTM", "GRU"):
        return cls(6, 6, num_layers=2, batch_first=True, **kwargs), (torch.randn(4, 5, 6),)
    if name == "MultiheadAttention":
        x = torch.randn(4, 5, 6)
        return cls(6, 2, batch_first=True, **kwargs), (x, x, x)
    raise AssertionError(name)


def _first(output):
    return output[0] if isinstance(output, tuple) else output


def _differs(module: nn.Module, inputs: tuple) -> bool:
    torch.manual_seed(0)
    with torch.no_grad():
        module.eval()
        module(*inputs)  # (lazy modules take their shapes; running stats start the same)
        state = {k: v.clone() for k, v in module.state_dict().items()}
        evaluated = _first(module(*inputs))
        module.load_state_dict(state)
        module.train()
        trained = _first(module(*inputs))
    return not torch.allclose(evaluated, trained)


# SyncBatchNorm needs a process group to run forward; the lazy classes take their shape from the
# first call, so their run here is not comparable: each is checked to derive from its rule's
# non-lazy class instead (test_lazy_and_sync_classes_share_their_rule)
_SKIP = {"SyncBatchNorm", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d",
         "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d"}
_CASES = [(name, rule) for rule in MODE_RULES for name in rule.classes if name not in _SKIP]


@pytest.mark.parametrize("name,rule", _CASES, ids=[n for n, _ in _CASES])
def test_each_rule_matches_what_pytorch_does(name, rule):
    assert hasattr(nn, name), f"torch.nn has no {name}"
    on = 0.5 if rule.positive else True
    module, inputs = _build(name, **{rule.attribute: on})
    assert rule.depends(getattr(module, rule.attribute)) and _differs(module, inputs)
    module, inputs = _build(name)  # the constructor's default
    assert getattr(module, rule.attribute) == rule.default
    assert _differs(module, inputs) == rule.depends(rule.default)
    if rule.depends(rule.default) is False:
        off, inputs = _build(name, **{rule.attribute: 0.0 if rule.positive else False})
        assert not _differs(off, inputs)


def test_lazy_and_sync_classes_share_their_rule():
    for name in _SKIP:
        base = "BatchNorm1d" if name == "SyncBatchNorm" else name.removeprefix("Lazy")
        assert issubclass(getattr(nn, name), nn.modules.batchnorm._NormBase)
        assert mode_rule(name) is mode_rule(base) and mode_rule(base) is not None
        assert isinstance(getattr(nn, name)(**({} if name.startswith("Lazy") else {"num_features": 3})),
                          nn.modules.batchnorm._NormBase)


def test_lookup_and_the_class_set():
    assert mode_rule("LSTM").attribute == "dropout" and mode_rule("Linear") is None
    assert {"Dropout", "BatchNorm2d", "InstanceNorm2d", "GRU", "MultiheadAttention",
            "AlphaDropout"} <= MODE_CLASSES


class _Noise(nn.Module):
    def forward(self, x):
        return x + torch.randn_like(x) if self.training else x


def test_the_sanitizer_finds_every_kind_and_names_it():
    model = nn.Sequential(nn.Linear(6, 6), nn.Dropout(0.0), nn.LSTM(6, 6, num_layers=2, dropout=0.2),
                          nn.MultiheadAttention(6, 2, dropout=0.1), nn.InstanceNorm1d(6),
                          nn.InstanceNorm1d(6, track_running_stats=True), nn.AlphaDropout(0.2),
                          _Noise(), nn.BatchNorm1d(6, track_running_stats=False))
    found = mode_dependent(model)
    assert [type(m).__name__ for m in found] == [
        "LSTM", "MultiheadAttention", "InstanceNorm1d", "AlphaDropout", "_Noise"]
    assert describe(found, limit=5) == (
        "LSTM(dropout=0.2), MultiheadAttention(dropout=0.1), InstanceNorm1d(6), "
        "AlphaDropout(p=0.2), _Noise (its forward reads self.training)")


def test_the_definition_imports_no_torch():
    code = "import sys, trainguard.apifacts, trainguard.lint.project; print('torch' in sys.modules)"
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": src}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=env)
    assert out.stdout.strip() == "False"


def _forward(src: str) -> ast.FunctionDef:
    return ast.parse(textwrap.dedent(src)).body[0]


@pytest.mark.parametrize("src, matters", [
    # torchvision-style detector: train mode picks the loss dict to return, the numbers are alike
    ("""def forward(self, x, y=None):
            out = self.head(x)
            if self.training:
                return {"loss": F.smooth_l1_loss(out, y)}
            return out""", False),
    ("""def forward(self, x):
            aux = self.aux(x) if self.training else None
            return self.main(x), aux""", False),
    ("""def forward(self, x):
            return x + torch.randn_like(x) if self.training else x""", True),
    ("""def forward(self, x):
            if not self.training or self.p == 0:
                return x
            return x * torch.bernoulli(torch.full_like(x, 1 - self.p))""", True),
    ("""def forward(self, x):
            return F.dropout(x, self.p, self.training)""", True),
    ("""def forward(self, x):
            if self.training:
                mean = x.mean(0)
            else:
                mean = self.running_mean
            return x - mean""", True),
    # the loss dict's losses reduced to numbers: a loss's reduction, not a norm's statistics
    ("""def forward(self, x, y=None):
            out = self.head(x)
            if not self.training:
                return out
            err = (out - y).pow(2).sum(-1)
            return {"loss": err.mean(), "aux": torch.mean(out.std(1), dim=None)}""", False),
    ("""def forward(self, x):
            if self.training:
                var, mean = torch.var_mean(x, (0, 2, 3), keepdim=True)
                return (x - mean) / var.sqrt()
            return (x - self.mu) / self.sigma""", True),
    ("""def forward(self, x):
            return (x - x.mean(self.dims)) if self.training else x - self.mu""", True),
    ("""def forward(self, x):
            if self.training:
                self.calls += 1
            return x""", True),
    ("""def forward(self, x):
            if self.training:
                self.ema.mul_(0.9).add_(x.detach().mean(0), alpha=0.1)
            return x - self.ema""", True),
    ("""def forward(self, x):
            flag = self.training
            return self.block(x, flag)""", True),
])
def test_a_training_read_matters_when_it_selects_randomness_or_state(src, matters):
    assert training_read_matters(_forward(src)) is matters


class _LossDictDetector(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(4, 2)

    def forward(self, x, y=None):
        out = self.head(x)
        if self.training:
            return {"loss": nn.functional.smooth_l1_loss(out, y)}
        return out


def test_a_forward_that_only_picks_its_return_is_not_mode_dependent():
    assert mode_dependent(_LossDictDetector()) == []
