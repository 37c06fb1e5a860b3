"""``trainguard run`` on an Accelerate script that saves its state each epoch and resumes."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("accelerate", reason="needs the `integrations` extra: pip install "
                                         "'trainguard[dev]' (accelerate)")

from cliutil import run_cli  # noqa: E402
from integration_helpers import SCRIPTS  # noqa: E402


def test_save_state_and_resume_have_no_findings(tmp_path) -> None:
    script = str(SCRIPTS / "accelerate_app.py")
    for run, epochs in (("first", "1"), ("resumed", "3")):
        r = run_cli("run", "--report", f"{run}.json", script, "--dir", ".", "--epochs", epochs,
                    cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-3000:]
        assert json.loads((tmp_path / f"{run}.json").read_text())["findings"] == [], r.stderr
    assert "epoch 3:" in r.stdout  # the second run resumed at epoch 1 and trained two more
