"""explain(): reached and unreached parameters and the cut found for each, on graphs with known cuts.

Cases follow real reports: a stray `.detach()` that stopped two weight matrices from learning
(queenie88/A-GCN#4, https://github.com/queenie88/A-GCN/issues/4); `argmax` in a differentiable
path ("argmax() has no derivative", https://forums.fast.ai/t/why-does-the-nll-has-grad-fn-while-accuracy-doesnt/50891);
a module run under `torch.no_grad()` that users could not tell was frozen (bowang-lab/MedSAM#233,
edreisMD/ConVIRT-pytorch#7); `round` whose gradient is zero (tools/autograd/derivatives.yaml);
an `.item()` round trip; an auxiliary head whose output is dropped. Each buggy forward has a fixed
twin that reaches every parameter.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import trainguard
from trainguard.errors import UsageError

from cliutil import cli_env

SOURCE = Path(__file__).read_text().splitlines()


def line_of(marker: str) -> int:
    return next(i for i, text in enumerate(SOURCE, 1) if text.rstrip().endswith(f"# {marker}"))


class Net(nn.Module):
    def __init__(self, cut: str) -> None:
        super().__init__()
        self.cut = cut
        self.enc = nn.Linear(4, 6)
        self.head = nn.Linear(6, 3)
        self.aux = nn.Linear(6, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.cut == "no_grad":
            with torch.no_grad():
                h = self.enc(x)  # cut-no-grad
        else:
            h = self.enc(x)
        if self.cut == "detach":
            h = h.detach()  # cut-detach
        elif self.cut == "integer":
            h = h.argmax(dim=1, keepdim=True).float().expand(-1, 6)  # cut-integer
        elif self.cut == "item":
            total = h.sum().item()  # cut-item
            self.peak = h.argmax()  # logged only: a later cut that does not feed the loss
            h = torch.full_like(x[:, :1], total).expand(-1, 6)
        elif self.cut == "round":
            h = h.round()  # cut-round
        if self.cut == "aux_unused":
            self.aux(h)
        elif self.cut != "no_aux":
            h = h + self.aux(h).sum(dim=1, keepdim=True)
        return self.head(h)


def loss_of(model: nn.Module):
    torch.manual_seed(0)
    x, y = torch.randn(5, 4), torch.tensor([0, 1, 2, 0, 1])
    return lambda: F.cross_entropy(model(x), y)


ENC = ["enc.weight", "enc.bias"]
CASES = [
    # cut, unreached parameters, reason, cut kind, cut op, marker line
    ("detach", ENC, "cut", "detach", "detach", "cut-detach"),
    ("integer", ENC, "cut", "integer", "argmax", "cut-integer"),
    ("item", ENC, "possible_cut", "escape", "item", "cut-item"),
    ("no_grad", ENC, "cut", "no_grad", "linear", "cut-no-grad"),
    ("round", ENC, "zero_grad", None, None, None),
    ("no_aux", ["aux.weight", "aux.bias"], "never_ran", None, None, None),
    ("aux_unused", ["aux.weight", "aux.bias"], "unused_output", None, None, None),
]


@pytest.mark.parametrize("cut, names, reason, kind, op, marker", CASES, ids=[c[0] for c in CASES])
def test_known_cut_is_found(cut, names, reason, kind, op, marker):
    torch.manual_seed(0)
    model = Net(cut)
    report = trainguard.explain(loss_of(model), model=model)
    unreached = {u.name: u for u in report.unreached}
    assert sorted(unreached) == sorted(names)
    assert {u.reason for u in unreached.values()} == {reason}
    expected_reached = {n for n, _ in model.named_parameters()} - set(names)
    if cut == "round":  # aux sees the rounded h: reached only through RoundBackward0 as well
        expected_reached -= {"enc.weight", "enc.bias"}
    assert set(report.reached) == expected_reached
    found = unreached[names[0]].cut
    if kind is None:
        assert found is None
    else:
        assert (found.kind, found.op) == (kind, op)
        assert Path(found.path).name == "test_explain.py" and found.line == line_of(marker)
        assert found.module == ("enc" if cut == "no_grad" else "Net")
    text = str(report)
    assert f"does NOT reach {len(names)}" in text and names[0] in text
    assert "see TG205 gradient-cut (trainguard rule TG205)" in text
    assert report.to_dict()["unreached"][0]["reason"] == reason


def test_fixed_twin_reaches_every_parameter():
    model = Net("none")
    report = trainguard.explain(loss_of(model), model=model)
    assert report.unreached == []
    assert set(report.reached) == {n for n, _ in model.named_parameters()}
    assert report.cuts == []


def test_loss_without_recording_lists_unreached_but_no_cut():
    model = Net("detach")
    loss = loss_of(model)()
    report = trainguard.explain(loss, model=model)
    assert [u.name for u in report.unreached] == ENC
    assert {u.reason for u in report.unreached} == {"not_recorded"}
    assert "explain(lambda" in str(report)


def test_recording_context_manager_gives_the_same_cut():
    model = Net("detach")
    with trainguard.explain.record(model) as rec:
        loss = loss_of(model)()
    report = trainguard.explain(loss, model=model, recording=rec)
    assert [c.op for c in report.cuts] == ["detach"]
    assert report.unreached[0].cut.line == line_of("cut-detach")


def test_metric_argmax_is_not_blamed_when_the_real_cut_is_a_detach():
    model = Net("detach")

    def step():
        logits = model(torch.randn(5, 4))
        _accuracy = (logits.argmax(1) == 0).float().mean()  # an innocent integer op
        return logits.sum()

    report = trainguard.explain(step, model=model)
    assert {u.cut.op for u in report.unreached} == {"detach"}


def test_frozen_parameters_are_not_reported_as_cut():
    model = Net("none")
    model.enc.requires_grad_(False)
    report = trainguard.explain(loss_of(model), model=model)
    assert report.unreached == []
    assert report.frozen == ENC


def test_tensor_facts():
    x = torch.randn(2, 3, requires_grad=True)
    leaf = trainguard.explain(x)
    assert (leaf.is_leaf, leaf.requires_grad, leaf.grad_fn, leaf.shape) == (True, True, None, (2, 3))
    y = trainguard.explain(x * 2)
    assert (y.is_leaf, y.grad_fn) == (False, "MulBackward0")
    assert "not a scalar (6 elements)" in str(y)
    with torch.inference_mode():
        z = x * 2
    inf = trainguard.explain(z)
    assert inf.is_inference and "inference_mode" in str(inf)
    ints = trainguard.explain((x * 2).argmax(1))
    assert ints.dtype == "int64" and "cannot require grad" in str(ints)


def test_module_modes_and_counts():
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Dropout(0.5), nn.Dropout(0.0),
                          nn.InstanceNorm1d(4, track_running_stats=True), nn.InstanceNorm1d(4),
                          nn.LSTM(4, 4, num_layers=2, dropout=0.1), nn.LayerNorm(4))
    model[0].requires_grad_(False)
    model.train()
    model[1].eval()  # frozen on purpose
    report = trainguard.explain(model)
    assert [(e.name, e.type, e.training) for e in report.mode_dependent] == [
        ("1", "BatchNorm1d", False), ("2", "Dropout", True), ("4", "InstanceNorm1d", True),
        ("6", "LSTM", True)]
    assert report.mixed == ["1"]
    assert report.frozen_params == 20 and report.frozen_names == ["0.weight", "0.bias"]
    expected = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert report.trainable_params == expected
    assert report.to_dict()["trainable_params"] == expected
    assert "frozen on purpose" in str(report)


def test_bad_argument_is_a_usage_error():
    with pytest.raises(UsageError, match="got int"):
        trainguard.explain(3)
    with pytest.raises(UsageError, match="returned float"):
        trainguard.explain(lambda: 1.0)


def test_public_names_work_in_any_import_order():
    # `import trainguard.explain.graph` binds the package as trainguard.explain; it stays callable.
    code = (
        "import torch, trainguard.explain.graph, trainguard\n"
        "from torch import nn\n"
        "m = nn.Linear(2, 1)\n"
        "with trainguard.explain.record(m) as rec:\n"
        "    loss = m(torch.randn(3, 2)).detach().sum()\n"
        "r = trainguard.explain(loss, model=m, recording=rec)\n"
        "print(sorted(u.name for u in r.unreached), r.unreached[0].cut.op)\n"
        "from trainguard.explain import explain, record\n"
        "print(callable(explain), callable(record), trainguard.graph.__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=cli_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["['bias', 'weight'] detach", "True True graph"]
