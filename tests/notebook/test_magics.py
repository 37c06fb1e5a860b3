"""``%load_ext trainguard``: ``%%trainguard`` and ``%trainguard lint``, driven through IPython's own
``InteractiveShell``."""

from __future__ import annotations

import pytest

pytest.importorskip("IPython", reason="needs IPython: pip install 'trainguard[dev]'")

from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from IPython.utils.capture import capture_output  # noqa: E402

MODEL_CELL = """import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(64, 4), torch.randn(64, 1)

def step():
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss
"""


@pytest.fixture
def shell():
    shell = InteractiveShell.instance()
    shell.run_cell("%load_ext trainguard", store_history=True)
    yield shell
    shell.run_cell("%reset -f", store_history=False)
    InteractiveShell.clear_instance()


def run(shell: InteractiveShell, cell: str):
    with capture_output() as captured:
        result = shell.run_cell(cell, store_history=True)
    return result, captured


def test_cell_magic_shows_findings_with_their_cells(shell) -> None:
    model_cell = run(shell, MODEL_CELL)[0].execution_count
    result, captured = run(shell, "%%trainguard\nlosses = []\nfor i in range(12):\n"
                                  "    losses.append(step())\n")
    loop_cell = result.execution_count
    assert result.success, result.error_in_exec
    [table] = [o.data for o in captured.outputs]
    text = table["text/plain"]
    assert text.startswith("trainguard: 1 finding (12 optimizer steps watched)")
    assert f"cell {loop_cell}, line 4: TG201 graph-kept-across-steps" in text, text
    assert "<td>TG201</td>" in table["text/html"] and f"<td>cell {loop_cell}</td>" in \
        table["text/html"]
    assert model_cell != loop_cell


def test_cell_magic_silent_on_the_fixed_cell_and_strict(shell) -> None:
    run(shell, MODEL_CELL)
    _, captured = run(shell, "%%trainguard --strict\nlosses = []\nfor i in range(12):\n"
                             "    losses.append(step().item())\n")
    assert captured.outputs[0].data["text/plain"] == \
        "trainguard: no findings (12 optimizer steps watched)"
    result, captured = run(shell, "%%trainguard --strict\nkept = [step() for i in range(12)]\n")
    assert isinstance(result.error_in_exec, Exception)
    assert type(result.error_in_exec).__name__ == "FindingsError"
    assert "TG201" in captured.outputs[0].data["text/plain"]


def test_finding_in_an_earlier_cell_names_that_cell(shell) -> None:
    # the forward runs in train mode inside a function defined in an earlier cell (TG101 is
    # reported at the model call, in that cell)
    defined = run(shell, "import torch\nfrom torch import nn\nnet = nn.Sequential(nn.Linear(4, 4), "
                         "nn.Dropout(0.5))\nx, y = torch.randn(8, 4), torch.randint(0, 4, (8,))\n"
                         "def accuracy():\n    with torch.no_grad():\n"
                         "        return (net(x).argmax(1) == y).float().mean().item()\n"
                  )[0].execution_count
    _, captured = run(shell, "%%trainguard\nprint(accuracy())\n")
    text = captured.outputs[0].data["text/plain"]
    assert f"cell {defined}, line 7: TG101 eval-in-train-mode" in text, text


def test_lint_line_magic_lints_the_cells_run_so_far(shell) -> None:
    run(shell, "import torch")
    loaded = run(shell, "x = 1\nstate = torch.load('ckpt.pt', weights_only=False)"
                 )[0].execution_count
    _, captured = run(shell, "%trainguard lint")
    text = captured.outputs[0].data["text/plain"]
    assert text.startswith("trainguard lint: 1 finding (the cells run so far)")
    assert f"cell {loaded}, line 2: TG701 unsafe-torch-load" in text, text


def test_bad_options_are_usage_errors(shell) -> None:
    result, _ = run(shell, "%%trainguard --every\nx = 1\n")  # (no abbreviations)
    assert type(result.error_in_exec).__name__ == "UsageError"
    assert "--select CODES" in str(result.error_in_exec)
    result, _ = run(shell, "%trainguard watch")
    assert "`%trainguard lint`" in str(result.error_in_exec)
