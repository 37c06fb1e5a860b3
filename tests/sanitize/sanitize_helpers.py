"""Helpers for the sanitizer's tests (imported by name; pytest puts this folder on sys.path): run ``trainguard run`` in a subprocess or in this process."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from cliutil import cli_env

HERE = Path(__file__).resolve().parent
CASES = HERE / "cases"
STRESS = HERE / "stress"  # scripts that stress the sanitizer itself (test_stress.py, benchmarks)


def run_tg(*args: str, cwd: str | Path | None = None, timeout: float = 120
           ) -> subprocess.CompletedProcess[str]:
    """``python -m trainguard ARGS`` in a subprocess."""
    return subprocess.run([sys.executable, "-m", "trainguard", *args], cwd=cwd,
                          env=cli_env(), capture_output=True, text=True, timeout=timeout)


def findings_of(run, *checks) -> list:
    """The findings of ``checks`` (Check classes) while ``run()`` runs under a fresh watcher."""
    from trainguard.config import Config
    from trainguard.sanitize.watcher import Watcher

    watcher = Watcher(config=Config(), stream=io.StringIO(), checks=list(checks)).start()
    try:
        run()
    finally:
        watcher.stop()
    return watcher.findings


def main_in_process(*args: str) -> int:
    """``trainguard ARGS`` in this process (``trainguard.cli.main``)."""
    from trainguard.cli import main

    return main(list(args))


def run_in_process(script: Path, *args: str):
    """Run ``script`` under a fresh watcher in this process; returns (watcher, status, stderr).

    The process-wide determinism flags a script may set (``cudnn.benchmark``/``deterministic``,
    ``use_deterministic_algorithms``) and the grad mode (a bare ``set_grad_enabled(False)`` left
    off) are restored afterwards, as if each script had its own
    process, as under ``trainguard run``; so are ``sys.path`` and the modules imported from the
    script's folder (a case's helper modules run their top-level code again for its twin).
    """
    from trainguard.config import Config
    from trainguard.sanitize.runner import run_target
    from trainguard.sanitize.watcher import Watcher

    stream = io.StringIO()
    restore = _determinism_flags()
    saved_path, saved_modules = sys.path[:], set(sys.modules)
    watcher = Watcher(config=Config(), stream=stream).start()
    try:
        status = run_target(str(script), list(args), kind="path", on_error=watcher.explain,
                            on_interrupt="raise")
    finally:
        watcher.stop()
        restore()
        sys.path[:] = saved_path
        _forget_new_modules(saved_modules, Path(script).resolve().parent)
    return watcher, status, stream.getvalue()


def _forget_new_modules(before: set[str], folder: Path) -> None:
    """Drop from ``sys.modules`` the modules not in ``before`` whose file lies under ``folder``."""
    prefix = str(folder) + os.sep
    for name in set(sys.modules) - before:
        file = getattr(sys.modules.get(name), "__file__", None)
        if file and os.path.abspath(file).startswith(prefix):
            del sys.modules[name]


def _determinism_flags():
    """Save torch's global determinism flags; returns a function that restores them."""
    import torch

    cudnn = torch.backends.cudnn
    saved = (cudnn.benchmark, cudnn.deterministic, torch.are_deterministic_algorithms_enabled(),
             torch.is_deterministic_algorithms_warn_only_enabled())
    grad_mode = torch.is_grad_enabled()

    def restore() -> None:
        cudnn.benchmark, cudnn.deterministic = saved[0], saved[1]
        torch.set_grad_enabled(grad_mode)
        if (torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled()) != saved[2:]:
            # (the first call imports torch._inductor: seconds, so only when a script changed it)
            torch.use_deterministic_algorithms(saved[2], warn_only=saved[3])
    return restore

