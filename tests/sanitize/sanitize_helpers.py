"""Helpers for the sanitizer's tests (imported by name; pytest puts this folder on sys.path): run ``trainguard run`` in a subprocess or in this process."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import os

HERE = Path(__file__).resolve().parent
CASES = HERE / "cases"
SRC = HERE.parents[1] / "src"


def cli_env() -> dict[str, str]:
    """The environment for a subprocess: this checkout's ``src`` first, one thread."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def run_tg(*args: str, cwd: str | Path | None = None, timeout: float = 120
           ) -> subprocess.CompletedProcess[str]:
    """``trainguard ARGS`` in a subprocess (the subcommands present in this checkout)."""
    return subprocess.run([sys.executable, str(HERE / "_main.py"), *args], cwd=cwd,
                          env=cli_env(), capture_output=True, text=True, timeout=timeout)


def main_in_process(*args: str) -> int:
    """``trainguard ARGS`` in this process (``trainguard.cli.main``, this checkout's subcommands)."""
    import _main

    return _main.cli.main(list(args))


def run_in_process(script: Path, *args: str):
    """Run ``script`` under a fresh watcher in this process; returns (watcher, status, stderr)."""
    from trainguard.config import Config
    from trainguard.sanitize.runner import run_target
    from trainguard.sanitize.watcher import Watcher

    stream = io.StringIO()
    watcher = Watcher(config=Config(), stream=stream).start()
    try:
        status = run_target(str(script), list(args), kind="path", on_error=watcher.explain)
    finally:
        watcher.stop()
    return watcher, status, stream.getvalue()

