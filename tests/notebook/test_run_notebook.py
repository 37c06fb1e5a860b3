"""``trainguard run notebook.ipynb``: the code cells in order, findings at their cell and line."""

from __future__ import annotations

import json
from pathlib import Path

from cliutil import run_cli
from notebook_helpers import write_notebook

from trainguard.lint.source import read_notebook

SETUP = """import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(64, 4), torch.randn(64, 1)
"""
# Modelled on the PyTorch FAQ's "Don't accumulate history across your training loop"
# (https://pytorch.org/docs/stable/notes/faq.html): the loss tensor kept in a list.
LOOP = """losses = []
for step in range(20):
    loss = nn.functional.mse_loss(model(x), y)
    losses.append({fix})
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def notebook(path: Path, kept: str) -> Path:
    return write_notebook(path, [
        ("markdown", "# Regression"),
        ("code", "%matplotlib inline\nimport math"),
        ("code", SETUP),
        ("code", LOOP.format(fix=kept)),   # cell 4
        ("code", "print(len(losses), math.pi > 3)"),
    ])


def test_bug_in_cell_4_is_reported_at_its_cell_and_line(tmp_path: Path) -> None:
    nb = notebook(tmp_path / "nb.ipynb", "loss")
    r = run_cli("run", "--report", "r.json", "nb.ipynb", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "20 True" in r.stdout  # every code cell ran, in order, in one namespace
    found = json.loads((tmp_path / "r.json").read_text())["findings"]
    assert [(f["code"], f["path"], f["cell"], f["line"]) for f in found] == \
        [("TG201", "nb.ipynb", 4, 4)]
    assert "nb.ipynb[cell 4]:4:5: TG201" in r.stderr
    assert "TG201  graph-kept-across-steps  nb.ipynb[cell 4]:4" in r.stderr  # the summary
    assert "nb.ipynb[cell 2]:1: IPython syntax '%matplotlib inline' skipped" in r.stderr
    assert nb.is_file()


def test_fixed_twin_has_no_findings(tmp_path: Path) -> None:
    notebook(tmp_path / "nb.ipynb", "loss.item()")
    r = run_cli("run", "nb.ipynb", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "trainguard: no findings" in r.stderr


def test_error_in_a_cell_names_the_cell(tmp_path: Path) -> None:
    write_notebook(tmp_path / "nb.ipynb",
                   [("code", "x = 1"), ("code", "y = 2\nraise ValueError('bad')")])
    r = run_cli("run", "nb.ipynb", cwd=tmp_path)
    assert r.returncode == 1
    assert 'File "' in r.stderr and "nb.ipynb[cell 2]\", line 2" in r.stderr
    assert "ValueError: bad" in r.stderr


def test_not_a_notebook_exits_2(tmp_path: Path) -> None:
    (tmp_path / "nb.ipynb").write_text("{not json", encoding="utf-8")
    r = run_cli("run", "nb.ipynb", cwd=tmp_path)
    assert r.returncode == 2
    assert "nb.ipynb: not a readable Jupyter notebook" in r.stderr


def test_a_training_cell_under_time_runs_and_is_watched(tmp_path: Path) -> None:
    # `%%time` on the training cell, as notebooks often time it: IPython runs the body once in
    # the notebook's namespace, so the run does too (its line 1 is the magic's line)
    write_notebook(tmp_path / "nb.ipynb", [
        ("code", SETUP),
        ("code", "%%time\n" + LOOP.format(fix="loss")),  # cell 2
        ("code", "%%bash\necho skipped"),
        ("code", "print(len(losses))"),
    ])
    r = run_cli("run", "--report", "r.json", "nb.ipynb", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "20" in r.stdout.split()
    found = json.loads((tmp_path / "r.json").read_text())["findings"]
    assert [(f["code"], f["cell"], f["line"]) for f in found] == [("TG201", 2, 5)]
    assert "nb.ipynb[cell 2]: its body under the cell magic '%%time' runs as plain Python" \
        in r.stderr
    assert "nb.ipynb[cell 3] starts with the cell magic '%%bash' and was not run" in r.stderr


def test_a_training_call_under_the_time_line_magic_runs_once(tmp_path: Path) -> None:
    # `%time losses = fit(20)`, as IPython's %time docs show it (a statement timed once): the
    # statement runs as Python, so training happens and its names reach the next cells
    fit = "def fit(steps):\n    " + LOOP.replace("range(20)", "range(steps)").replace(
        "\n", "\n    ").rstrip() + "\n    return losses\n"
    write_notebook(tmp_path / "nb.ipynb", [
        ("code", SETUP),
        ("code", fit.format(fix="loss")),  # cell 2
        ("code", "%time losses = fit(20)\n%prun -s cumtime fit(1)"),  # cell 3
        ("code", "print(len(losses))"),
    ])
    r = run_cli("run", "--report", "r.json", "nb.ipynb", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == "20"
    found = json.loads((tmp_path / "r.json").read_text())["findings"]
    assert [(f["code"], f["cell"], f["line"]) for f in found] == [("TG201", 2, 5)]
    assert "nb.ipynb[cell 3]:1: the statement under '%time' runs as plain Python" in r.stderr
    # (with options, the statement is not read: skipped as other IPython syntax)
    assert "nb.ipynb[cell 3]:2: IPython syntax '%prun -s cumtime fit(1)' skipped" in r.stderr
    source = read_notebook("nb.ipynb", (tmp_path / "nb.ipynb").read_text())
    assert "losses = fit(20)\n" in source.text and "fit(1)" not in source.text
