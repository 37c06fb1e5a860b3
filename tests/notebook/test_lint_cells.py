"""``trainguard lint`` on a notebook: the place and the line numbers inside a message are the
cell's own."""

from __future__ import annotations

import json
from pathlib import Path

from cliutil import run_cli
from notebook_helpers import write_notebook

SETUP = """import torch
from torch import nn
model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 4), torch.randn(8, 1)
"""
# gradients never zeroed (PyTorch's "Zeroing out gradients" recipe)
LOOP = """for step in range(10):
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
"""


def _lint(tmp_path: Path) -> dict:
    write_notebook(tmp_path / "nb.ipynb", [("markdown", "# t"), ("code", SETUP), ("code", LOOP)])
    r = run_cli("lint", "--format", "json", "nb.ipynb", cwd=tmp_path)
    [finding] = json.loads(r.stdout)["findings"]
    return finding


def test_finding_is_placed_at_its_cell_and_line(tmp_path: Path) -> None:
    f = _lint(tmp_path)
    # at the step's forward, where zero_grad() goes (the step, line 4, is named in the message)
    assert (f["code"], f["path"], f["cell"], f["line"]) == ("TG301", "nb.ipynb", 3, 2)


def test_line_numbers_inside_the_message_are_cell_lines(tmp_path: Path) -> None:
    f = _lint(tmp_path)
    assert "loop at cell 3, line 1," in f["message"], f["message"]
    assert "line 6" not in f["message"]  # (the joined cells' line of that loop)
