"""In a notebook, every line a lint message names is a cell line.

A notebook's code cells are linted as one joined script; its line numbers exist in no cell, so a
message that cites another line (the loop, the step, the call) says the cell and the line within
it, as the finding's own place does. Differential test: each lint fixture is split into cells at
its top-level statements (markdown cells in between, so cell numbers and code-cell indices
differ), linted as a notebook and as a file, and the two messages must agree line for line.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from tests.conftest import run_cli
from trainguard.lint.engine import lint_source
from trainguard.lint.source import Source, read_notebook

FIXTURES = Path(__file__).parent / "fixtures"
# "line 12" and "lines 12, 30", but not another file's "helpers.py line 12"
_LINE_REF = re.compile(r"(?<!\.py )\blines? (\d+(?:, \d+)*)")


def _split(text: str) -> list[tuple[str, str]]:
    """The file as notebook cells: one code cell per top-level statement (with its decorators
    and the comments above it), a markdown cell before each."""
    lines = text.splitlines(keepends=True)
    starts = sorted({1} | {min([s.lineno] + [d.lineno for d in getattr(s, "decorator_list", [])])
                           for s in ast.parse(text).body})
    cells = []
    for first, nxt in zip(starts, starts[1:] + [len(lines) + 1]):
        cells.append(("markdown", f"Cell from line {first}"))
        cells.append(("code", "".join(lines[first - 1:nxt - 1])))
    return cells


def _notebook(cells: list[tuple[str, str]]) -> str:
    return json.dumps({"cells": [{"cell_type": kind, "metadata": {}, "source": src,
                                  **({"outputs": [], "execution_count": None}
                                     if kind == "code" else {})}
                                 for kind, src in cells],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def _in_cells(message: str, source: Source) -> str:
    """``message`` with each line of the joined script named as the notebook names it."""
    def one(line: int) -> str:
        cell, shown = source.locate(line)
        return f"cell {cell}, line {shown}"

    def sub(m: re.Match[str]) -> str:
        return " and ".join(one(int(n)) for n in m.group(1).split(", "))
    return _LINE_REF.sub(sub, message)


def _fixtures() -> list[Path]:
    return sorted(p for p in FIXTURES.glob("*/*.py") if p.parent.name != "TG001")


@pytest.mark.parametrize("path", _fixtures(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_messages_name_cell_lines(path: Path) -> None:
    text = path.read_text()
    nb = read_notebook("nb.ipynb", _notebook(_split(text)))
    assert nb.text.splitlines() == text.splitlines()  # the cells join back into the file
    as_file = lint_source(Source(path="t.py", text=text)).findings
    as_notebook = lint_source(nb).findings
    assert sorted((f.code, f.message, f.fix) for f in as_notebook) == sorted(
        (f.code, _in_cells(f.message, nb), f.fix and _in_cells(f.fix, nb)) for f in as_file)
    for f in as_notebook:
        assert not _LINE_REF.search(re.sub(r"cell \d+, line \d+", "", f.message)), f.message


def test_the_differential_test_sees_line_references() -> None:
    # Without messages that cite other lines, the test above would pass on joined line numbers.
    cited = 0
    for path in _fixtures():
        for f in lint_source(Source(path="t.py", text=path.read_text())).findings:
            cited += bool(_LINE_REF.search(f.message))
    assert cited >= 20


LOOP_IN_CELL_3 = [
    ("code", "import torch\nimport torch.nn as nn\n"),
    ("markdown", "## Data and model"),
    ("code", "model = nn.Linear(8, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
             "data = [(torch.randn(4, 8), torch.randint(0, 2, (4,))) for _ in range(10)]\n"),
    ("code", "loss_fn = nn.CrossEntropyLoss()\n"
             "for x, y in data:\n"
             "    loss = loss_fn(model(x), y)\n"
             "    loss.backward()\n"
             "    opt.step()\n"),
]


def test_sarif_for_a_notebook_names_the_cell_in_place_and_message(tmp_path: Path) -> None:
    # Gradients never zeroed (TG301), reported at the step's forward in cell 4 (where zero_grad
    # goes); the message's loop is the `for` on that cell's line 2 (line 7 of the joined code, a
    # line no cell has) and its step is on that cell's line 5.
    (tmp_path / "nb.ipynb").write_text(_notebook(LOOP_IN_CELL_3))
    r = run_cli("lint", "nb.ipynb", "--format", "sarif", cwd=tmp_path)
    [result] = json.loads(r.stdout)["runs"][0]["results"]
    assert result["ruleId"] == "TG301"
    [loc] = result["locations"]
    assert loc["logicalLocations"] == [{"name": "cell 4",
                                        "fullyQualifiedName": "nb.ipynb[cell 4]"}]
    assert (loc["properties"]["cell"], loc["properties"]["cellLine"]) == (4, 3)
    assert "the loop at cell 4, line 2," in result["message"]["text"]
    assert "step() at cell 4, line 5 " in result["message"]["text"]
    assert "line 7" not in result["message"]["text"]
