"""graph(): DOT nodes for parameters, saved tensors, cuts, folded blocks and the depth limit."""

from __future__ import annotations

import re
import shutil

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import trainguard
from trainguard.errors import UsageError
from trainguard.explain import graph as graph_module


class Tower(nn.Module):
    def __init__(self, blocks: int = 5, detach: bool = False) -> None:
        super().__init__()
        self.detach = detach
        self.stem = nn.Linear(4, 8)
        self.blocks = nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.ReLU())
                                      for _ in range(blocks)])
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        if self.detach:
            h = h.detach()
        return self.head(self.blocks(h))


def forward(model: nn.Module):
    torch.manual_seed(0)
    x, y = torch.randn(5, 4), torch.tensor([0, 1, 2, 0, 1])
    return lambda: F.cross_entropy(model(x), y)


def labels(dot: str) -> list[str]:
    return re.findall(r'label="([^"]*)"', dot)


def test_small_graph_has_named_leaves_and_saved_sizes():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    loss = F.cross_entropy(model(torch.randn(5, 4)), torch.tensor([0, 1, 2, 0, 1]))
    g = trainguard.graph(loss, model=model)
    names = labels(g.dot)
    for param in ("0.weight\\n(8, 4) float32", "0.bias\\n(8,) float32", "2.weight\\n(3, 8) float32",
                  "2.bias\\n(3,) float32"):
        assert param in names
    assert any(n.startswith("NllLossBackward0") for n in names)
    assert any("saved mat1: (5, 8) float32" in n for n in names)  # second Linear's input
    assert any(n.startswith("ReluBackward0\\nsaved result: (5, 8)") for n in names)
    assert g.total_nodes == g.nodes == len(names)
    # Distinct saved tensors, in bytes: log-probs (5, 3) saved by NllLoss and LogSoftmax alike
    # 60, targets 40, total_weight 4, ReLU output (5, 8) saved by ReLU and the second addmm 160,
    # its weight view (8, 3) 96, the input (5, 4) 80.
    assert g.saved_bytes == 60 + 40 + 4 + 160 + 96 + 80
    assert g.dot.startswith("digraph backward {") and g.dot.rstrip().endswith("}")


def test_recorded_cut_is_drawn_with_the_parameters_it_cuts_off():
    model = Tower(blocks=1, detach=True)
    g = trainguard.graph(forward(model), model=model)
    cut = [n for n in labels(g.dot) if n.startswith("CUT:")]
    assert len(cut) == 1
    assert "`.detach()`" in cut[0] and "cuts off: stem.bias, stem.weight" in cut[0]
    assert "stem.weight" not in [n.split("\\n")[0] for n in labels(g.dot)]  # not a leaf here
    assert g.unreached == ["stem.weight", "stem.bias"]
    assert "not reached (no gradient): stem.weight, stem.bias" in labels(g.dot)


def test_zero_gradient_op_is_marked():
    x = torch.randn(3, requires_grad=True)
    g = trainguard.graph((x * 2).round().sum())
    assert any(n.startswith("RoundBackward0") and "CUT: gradient is zero" in n
               for n in labels(g.dot))


def test_repeated_blocks_are_folded_when_recorded():
    model = Tower(blocks=6)
    g = trainguard.graph(forward(model), model=model)
    assert g.collapsed == ["blocks.1 ... blocks.5: 5 repeated blocks folded (3 ops each)"]
    leaves = [n.split("\\n")[0] for n in labels(g.dot)]
    assert "blocks.0.0.weight" in leaves and "blocks.3.0.weight" not in leaves
    assert "stem.weight" in leaves and "head.weight" in leaves
    unfolded = trainguard.graph(forward(model)(), model=model)  # not recorded: nothing folds
    assert unfolded.collapsed == [] and g.nodes < unfolded.nodes == unfolded.total_nodes


def test_depth_limit_and_max_nodes_summarize():
    model = Tower(blocks=6)
    loss = forward(model)()
    g = trainguard.graph(loss, model=model, depth=2)
    assert g.nodes == 3 and g.hidden_deeper == g.total_nodes - 3
    assert f"... {g.hidden_deeper} nodes deeper than depth 2" in g.dot
    small = trainguard.graph(loss, model=model, max_nodes=10)
    assert small.nodes <= 10 and small.hidden_deeper > 0


def test_dot_file_is_written(tmp_path):
    x = torch.randn(3, requires_grad=True)
    out = tmp_path / "g.dot"
    g = trainguard.graph((x * x).sum(), output=out)
    assert out.read_text() == g.dot


def test_svg_without_graphviz_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(graph_module.shutil, "which", lambda name: None)
    x = torch.randn(3, requires_grad=True)
    with pytest.raises(UsageError, match=r"apt install graphviz.*conda install graphviz"):
        trainguard.graph((x * x).sum(), output=tmp_path / "g.svg")


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` is not installed")
def test_svg_with_graphviz(tmp_path):
    x = torch.randn(3, requires_grad=True)
    out = trainguard.graph((x * x).sum(), output=tmp_path / "g.svg").save(tmp_path / "g.svg")
    assert out.read_text().lstrip().startswith(("<?xml", "<svg"))


@pytest.mark.parametrize("kwargs, message", [
    ({"depth": 0}, "depth must be 1 or more"),
    ({"max_nodes": 1}, "must be 2 or more"),
    ({"output": "g.txt"}, "use a .dot, .svg"),
])
def test_bad_arguments(kwargs, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    x = torch.randn(3, requires_grad=True)
    with pytest.raises(UsageError, match=message):
        trainguard.graph((x * x).sum(), **kwargs)


def test_tensor_without_graph_is_a_usage_error():
    with pytest.raises(UsageError, match="has no grad_fn"):
        trainguard.graph(torch.randn(3))
