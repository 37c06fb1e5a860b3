"""TG504 judges a checkpoint by what it holds (Lightning's ``optimizer_states`` list), and TG701
reports only a ``torch.load`` in the user's own code, not one inside a library."""

from __future__ import annotations

import sys
from pathlib import Path

from sanitize_helpers import run_in_process


def _codes(watcher) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in watcher.findings]


LIGHTNING_STYLE = """import torch
from torch import nn

model = nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1)
for _ in range(3):
    model(torch.randn(8, 4)).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
torch.save({{"epoch": 3, "global_step": 3, "state_dict": model.state_dict(),
            "optimizer_states": {optimizer_states},
            "lr_schedulers": [scheduler.state_dict()]}}, "last.ckpt")
"""


def test_tg504_reads_a_list_of_optimizer_states(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "save.py"
    script.write_text(LIGHTNING_STYLE.format(optimizer_states="[optimizer.state_dict()]"))
    watcher, status, _ = run_in_process(script)
    assert status == 0 and _codes(watcher) == []
    script.write_text(LIGHTNING_STYLE.format(optimizer_states="[]"))  # the buggy twin
    watcher, status, _ = run_in_process(script)
    # at the dict's last entry (line 13), where the missing optimizer state belongs
    assert status == 0 and _codes(watcher) == [("TG504", 13)]


LIBRARY = """import torch


def restore(path):
    return torch.load(path, weights_only=False)
"""
def test_tg701_only_for_loads_in_user_code(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    lib = tmp_path / "site-packages"  # an installed package: not the user's code
    lib.mkdir()
    (lib / "restorelib.py").write_text(LIBRARY)
    # the file comes from elsewhere: written by another process before this run
    import torch

    torch.save({"step": 1}, tmp_path / "elsewhere.pt")
    script = tmp_path / "load.py"
    script.write_text("import sys\nsys.path.insert(0, %r)\nimport torch\nimport restorelib\n\n"
                      "state = restorelib.restore('elsewhere.pt')\n" % str(lib))
    watcher, status, _ = run_in_process(script)
    assert status == 0 and _codes(watcher) == []
    script.write_text("import torch\n\nstate = torch.load('elsewhere.pt', weights_only=False)\n")
    watcher, status, _ = run_in_process(script)
    assert status == 0 and _codes(watcher) == [("TG701", 3)]
    sys.modules.pop("restorelib", None)
