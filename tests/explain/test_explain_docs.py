"""The explain example in docs/instruments.md runs and prints what the docs show."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from cliutil import cli_env

DOCS = Path(__file__).resolve().parents[2] / "docs" / "instruments.md"


def test_explain_example_output_matches_the_docs(tmp_path):
    text = DOCS.read_text()
    section = text[text.index("## `trainguard.explain`"):]
    code, shown = re.findall(r"```(?:python)?\n(.*?)```", section, flags=re.S)[:2]
    script = tmp_path / "train.py"
    script.write_text(code)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          cwd=tmp_path, env=cli_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == shown.strip()
