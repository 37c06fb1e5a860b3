"""Helpers for the trainer-integration tests: run a script of ``scripts/`` in a subprocess and read
the findings each run wrote, and the lines its ``# cause: FAULT`` comments mark."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from cliutil import cli_env

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def cause_line(script: Path, fault: str) -> int:
    """The line of ``script`` marked ``# cause: FAULT``."""
    for number, line in enumerate(script.read_text().splitlines(), start=1):
        if re.search(rf"# cause: {re.escape(fault)}\b", line):
            return number
    raise LookupError(f"{script.name} has no '# cause: {fault}' line")


def run_script(script: Path, *args: str, cwd: Path, timeout: float = 600
               ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(script), *args], cwd=cwd, env=cli_env(),
                          capture_output=True, text=True, timeout=timeout)


def findings(report_dir: Path, fault: str) -> list[dict]:
    """The findings a run wrote to ``report_dir/FAULT.json``."""
    return json.loads((report_dir / f"{fault}.json").read_text())["findings"]


def where(found: list[dict]) -> list[tuple[str, str, int]]:
    """``(code, file name, line)`` of each finding, but the watchdog's TG002s: on a machine so
    loaded that the checks' wall time passes half of the fit's first seconds, the watchdog stops
    a check (``sanitize/watchdog.py``) and says so; the fault's own finding is still required."""
    return [(f["code"], Path(f["path"]).name, f["line"]) for f in found
            if not (f["code"] == "TG002" and re.search(r"took [\d.]+ s of the run's first",
                                                        f["message"]))]
