"""``trainguard graph script.py --tensor NAME``: run a script, draw the named tensor's graph."""

from __future__ import annotations

import importlib.util
import json
import textwrap

import pytest

from trainguard import cli

SCRIPT = textwrap.dedent("""\
    import sys
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    x = torch.randn(3, 4)
    h = model[0](x).detach()
    loss = model[2](model[1](h)).pow(2).mean()
    count = len(sys.argv)
""")


@pytest.fixture
def main(monkeypatch):
    # Only this part's subcommands: the CLI is exercised in-process through cli.main.
    monkeypatch.setattr(cli, "_SUBCOMMANDS", ["trainguard.explain.cli", "trainguard.env"])
    return cli.main


def test_graph_writes_dot_to_stdout_with_the_cut(main, tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    assert main(["graph", str(script), "--tensor", "loss"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("digraph backward {")
    assert "2.weight\\n(1, 8) float32" in out and "in 2\\n" in out
    assert "CUT: `.detach()` returned a tensor detached from the graph at train.py:8" in out
    assert "cuts off: 0.bias, 0.weight" in out
    assert "graph: 6 of 6 nodes drawn" in err


def test_graph_depth_and_dot_file(main, tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    out_file = tmp_path / "loss.dot"
    assert main(["graph", str(script), "--tensor", "loss", "--depth", "2", "-o",
                 str(out_file), "--args", "a b"]) == 0
    dot = out_file.read_text()
    assert "nodes deeper than depth 2" in dot
    assert "wrote" in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--tensor", "lost"], "no global variable 'lost' at exit; tensors with a graph there: loss"),
    (["--tensor", "count"], "'count' is a int, not a tensor"),
    (["--tensor", "loss", "--model", "net"], "no global nn.Module 'net'; modules there: model"),
    (["--tensor", "loss", "-o", "x.txt"], "use a file name ending in .dot, .gv, .svg"),
])
def test_graph_usage_errors_exit_2(main, tmp_path, capsys, args, message):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    assert main(["graph", str(script), *args]) == 2
    assert message in capsys.readouterr().err


def test_graph_missing_script_exits_2(main, tmp_path, capsys):
    assert main(["graph", str(tmp_path / "nope.py"), "--tensor", "loss"]) == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.skipif(importlib.util.find_spec("trainguard.loop") is None,
                    reason="the full CLI needs every subcommand module present")
def test_graph_end_to_end(cli, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    done = cli("graph", str(script), "--tensor", "loss", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "CUT: `.detach()`" in done.stdout


def test_explain_command_text_and_json(main, tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    assert main(["explain", str(script), "--tensor", "loss"]) == 0
    out = capsys.readouterr().out
    assert "reaches 2 trainable parameter tensors: 2.weight, 2.bias" in out
    assert "0.weight, 0.bias: `.detach()` returned a tensor detached from the graph at " \
        "train.py:8" in out
    assert main(["explain", str(script), "--tensor", "loss", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(u["name"], u["reason"], u["cut"]["line"]) for u in data["unreached"]] == [
        ("0.weight", "cut", 8), ("0.bias", "cut", 8)]


def test_explain_command_on_a_module(main, tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT + "model.eval()\n")
    assert main(["explain", str(script), "--tensor", "model"]) == 0
    assert capsys.readouterr().out.startswith("Sequential in eval mode (training=False)")


def test_script_error_is_reported_as_the_script_s(main, tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT + "raise RuntimeError('boom')\n")
    assert main(["graph", str(script), "--tensor", "loss"]) == 2
    err = capsys.readouterr().err
    assert "raised RuntimeError: boom; fix the script" in err and "Traceback" in err


@pytest.mark.parametrize("extra, expected_leaf", [
    ("first = model[0]\n", "2.weight\\n"),  # a module held by another: names stay the model's
    ("other = nn.Linear(2, 2)\n", "model.2.weight\\n"),  # two models: prefixed by global name
])
def test_graph_names_parameters_from_the_script_modules(main, tmp_path, capsys, extra,
                                                        expected_leaf):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT + extra)
    assert main(["graph", str(script), "--tensor", "loss"]) == 0
    assert f'label="{expected_leaf}' in capsys.readouterr().out
