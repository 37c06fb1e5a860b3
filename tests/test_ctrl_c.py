"""One Ctrl-C stops the test suite, also while a test runs a script in this process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cliutil import cli_env

TESTS = Path(__file__).resolve().parent


def test_runner_reraises_ctrl_c_when_asked(tmp_path):
    from trainguard.sanitize.runner import run_target

    script = tmp_path / "train.py"
    script.write_text("raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        run_target(str(script), [], kind="path", on_interrupt="raise")


def test_one_sigint_stops_the_suite_even_when_a_script_turns_it_into_130(tmp_path):
    marker = tmp_path / "second_test_ran"
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["ctrl_c"]\n')
    (tmp_path / "test_a.py").write_text(textwrap.dedent(f"""
        import os, signal
        from trainguard.cli import main

        def test_first(tmp_path):
            script = tmp_path / "train.py"
            script.write_text("import os, signal\\nos.kill(os.getpid(), signal.SIGINT)\\n")
            assert main(["run", str(script)]) == 130  # the script's status, as python gives it

        def test_second():
            open({str(marker)!r}, "w").close()
        """))
    env = cli_env()
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env["PYTHONPATH"]])
    # A shell starts background jobs with SIGINT ignored, and Python then installs no Ctrl-C
    # handler: give the inner suite the disposition of a terminal's foreground process.
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p",
                           "no:xdist", "-q", "-o", "addopts=", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert not marker.exists(), proc.stdout
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, proc.stdout + proc.stderr
