"""The integrations import their framework only when used."""

from __future__ import annotations

import subprocess
import sys

from cliutil import cli_env


def test_importing_trainguard_and_its_integrations_imports_no_framework() -> None:
    code = ("import sys, trainguard, trainguard.integrations, trainguard.notebook\n"
            "print(sorted(m for m in ('lightning', 'pytorch_lightning', 'transformers', "
            "'accelerate', 'IPython', 'torch') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], env=cli_env(), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
