"""Run the CLI in a subprocess exactly as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def cli_env(**extra: str) -> dict[str, str]:
    """The environment for a ``python -m trainguard`` subprocess: this checkout's src first."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update(extra)
    return env


def run_cli(*args: str, cwd: str | Path | None = None, timeout: float = 300,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m trainguard ARGS`` and return the completed process (text output)."""
    return subprocess.run(
        [sys.executable, "-m", "trainguard", *args],
        cwd=cwd, env=env or cli_env(), capture_output=True, text=True, timeout=timeout,
    )
