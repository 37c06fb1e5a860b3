"""``trainguard run`` end to end: the script runs as ``python`` would run it, findings are printed,
written and selected as the catalogue says, and exit statuses pass through."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

import pytest

from sanitize_helpers import main_in_process, run_tg

LEAKY = textwrap.dedent("""\
    import sys
    import torch
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    total = 0
    for step in range(6):
        optimizer.zero_grad()
        loss = model(torch.randn(4, 3)).pow(2).mean()
        loss.backward()
        optimizer.step()
        total += loss{comment}
    print("argv", sys.argv[1:], __name__)
""")


def write(tmp_path, text, name="train.py"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_script_sees_its_argv_and_main_and_findings_go_to_stderr(tmp_path):
    write(tmp_path, LEAKY.format(comment=""))
    proc = run_tg("run", "train.py", "--epochs", "3", "-x", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "argv ['--epochs', '3', '-x'] __main__" in proc.stdout
    first = [line for line in proc.stderr.splitlines() if "TG201" in line][0]
    assert first.startswith("train.py:12:5: TG201 graph-kept-across-steps: ")
    assert "`total` holds them" in first and "(fix: " in first
    assert "count  code" in proc.stderr and "trainguard: 1 finding" in proc.stderr


def test_report_json_has_the_catalogue_shape_and_strict_exits_1(tmp_path, monkeypatch, capsys):
    write(tmp_path, LEAKY.format(comment=""))
    monkeypatch.chdir(tmp_path)
    status = main_in_process("run", "--strict", "--report", "out.json", "train.py")
    assert status == 1, capsys.readouterr().err
    data = json.loads((tmp_path / "out.json").read_text())
    (finding,) = data["findings"]
    assert {k: finding[k] for k in ("code", "name", "layer", "path", "line", "col")} == {
        "code": "TG201", "name": "graph-kept-across-steps", "layer": "run",
        "path": "train.py", "line": 12, "col": 5}
    assert finding["count"] >= 1 and finding["docs"] == "trainguard rule TG201"
    assert finding["helpUri"].endswith("/rules/TG201.md")
    assert finding["why"] and finding["fix"] and "step" in finding["message"]


@pytest.mark.parametrize("flags,comment,pyproject,reported", [
    ([], "", None, True),
    ([], "  # noqa: TG201", None, False),
    ([], "  # trainguard: ignore[TG2]", None, False),
    (["--ignore", "TG2"], "", None, False),
    (["--select", "TG3"], "", None, False),
    ([], "", '[tool.trainguard]\nignore = ["TG201"]\n', False),
    (["--select", "TG201"], "", '[tool.trainguard]\nignore = ["TG201"]\n', False),
    (["--ignore", "TG3"], "", '[tool.trainguard]\nignore = ["TG201"]\n', True),
])
def test_selection_and_suppression(tmp_path, monkeypatch, capsys, flags, comment, pyproject,
                                   reported):
    write(tmp_path, LEAKY.format(comment=comment))
    if pyproject:
        write(tmp_path, pyproject, "pyproject.toml")
    monkeypatch.chdir(tmp_path)
    status = main_in_process("run", "--strict", *flags, "train.py")
    err = capsys.readouterr().err
    assert ("TG201 graph-kept-across-steps" in err) is reported, err
    assert status == (1 if reported else 0)


def test_clean_script_strict_exits_0_and_says_so(tmp_path, monkeypatch, capsys):
    write(tmp_path, "import torch\nprint(torch.ones(2).sum().item())\n")
    monkeypatch.chdir(tmp_path)
    status = main_in_process("run", "--strict", "train.py")
    out, err = capsys.readouterr()
    assert status == 0 and out.strip() == "2.0"
    assert "trainguard: no findings" in err


@pytest.mark.parametrize("body,status", [
    ("import sys\nsys.exit(7)\n", 7),
    ("raise SystemExit('bad input')\n", 1),
    ("raise SystemExit(0)\n", 0),
    ("raise KeyboardInterrupt\n", 130),
])
def test_exit_status_passes_through(tmp_path, monkeypatch, capsys, body, status):
    write(tmp_path, body)
    monkeypatch.chdir(tmp_path)
    assert main_in_process("run", "train.py") == status, capsys.readouterr().err


def test_sigterm_dies_of_the_signal_as_python_does_after_the_report(tmp_path):
    # `python train.py` dies of an unhandled SIGTERM (its parent sees -15, a shell $? of 143); the
    # watched run must end the same way, once its summary and --report are written.
    write(tmp_path, "import os, signal, time\nprint('before', flush=True)\n"
                    "os.kill(os.getpid(), signal.SIGTERM)\ntime.sleep(5)\n")
    plain = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120)
    proc = run_tg("run", "--report", "out.json", "train.py", cwd=tmp_path)
    assert plain.returncode == -signal.SIGTERM
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    assert proc.stdout == plain.stdout == "before\n"
    assert "trainguard: no findings" in proc.stderr
    assert json.loads((tmp_path / "out.json").read_text()) == {"findings": []}


def test_sigterm_the_script_handles_keeps_its_exit_status(tmp_path):
    write(tmp_path, "import os, signal, sys\n"
                    "signal.signal(signal.SIGTERM, lambda *a: sys.exit(5))\n"
                    "os.kill(os.getpid(), signal.SIGTERM)\n")
    plain = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, timeout=120)
    assert plain.returncode == run_tg("run", "train.py", cwd=tmp_path).returncode == 5


def test_uncaught_exception_shows_the_scripts_traceback_and_exits_1(tmp_path):
    write(tmp_path, "def f():\n    raise ValueError('boom')\nf()\n")
    proc = run_tg("run", "--strict", "train.py", cwd=tmp_path)
    assert proc.returncode == 1
    assert 'File "' in proc.stderr and "train.py\", line 2, in f" in proc.stderr
    assert "ValueError: boom" in proc.stderr and "runpy" not in proc.stderr


def test_module_mode_runs_package_main(tmp_path):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text("import sys\nprint(__name__, sys.argv)\nsys.exit(4)\n")
    proc = run_tg("run", "-m", "mypkg.train", "--lr", "0.1", cwd=tmp_path)
    assert proc.returncode == 4, proc.stderr
    assert "__main__" in proc.stdout and "'--lr', '0.1'" in proc.stdout


@pytest.mark.parametrize("args,needle", [
    (["run", "missing.py"], "no such script 'missing.py'"),
    (["run", "-m", "no_such_module_here"], "no module named 'no_such_module_here'"),
    (["run"], "give a script to run"),
    (["run", "--select", "XX1", "train.py"], "matches no trainguard code"),
])
def test_usage_errors_exit_2(tmp_path, monkeypatch, capsys, args, needle):
    write(tmp_path, "print(1)\n")
    monkeypatch.chdir(tmp_path)
    status = main_in_process(*args)
    err = capsys.readouterr().err
    assert status == 2, err
    assert needle in err


SHOW_PATHS = textwrap.dedent("""\
    import os, sys
    print("file", repr(__file__), "argv0", repr(sys.argv[0]), "path0", repr(sys.path[0]))
    print("code", repr(sys._getframe().f_code.co_filename))
    os.chdir(os.path.dirname(os.path.dirname(__file__)))
    print("still readable after chdir", os.path.isfile(__file__))
""")


@pytest.mark.parametrize("typed", ["sub/show.py", "./sub/show.py", "sub/../sub/show.py"])
def test_file_and_argv0_are_what_python_gives(tmp_path, typed):
    import os
    import subprocess
    import sys

    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub", SHOW_PATHS, name="show.py")
    plain = subprocess.run([sys.executable, typed], cwd=tmp_path, capture_output=True, text=True,
                           timeout=60)
    watched = run_tg("run", typed, cwd=tmp_path)
    assert plain.returncode == 0 and watched.returncode == 0, watched.stderr
    absolute = os.path.join(str(tmp_path), typed)  # not normalized, as CPython joins them
    assert f"file {absolute!r} argv0 {typed!r}" in plain.stdout
    assert watched.stdout == plain.stdout


def test_pytorchs_warnings_name_the_scripts_line_not_the_wrapper(tmp_path):
    # F.mse_loss warns about the (N,1) target with stacklevel=2, which names its caller: under the
    # watcher that caller is the wrapper, and the warning must still show the script's line
    write(tmp_path, textwrap.dedent("""\
        import torch
        import torch.nn.functional as F
        pred = torch.zeros(8, requires_grad=True)
        loss = F.mse_loss(pred, torch.ones(8, 1))
        loss.backward()
    """))
    plain = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120)
    watched = run_tg("run", "train.py", cwd=tmp_path)
    assert watched.returncode == 0 == plain.returncode, watched.stderr
    shown = [line for line in watched.stderr.splitlines() if "UserWarning" in line]
    expected = [line for line in plain.stderr.splitlines() if "UserWarning" in line]
    assert len(shown) == 1 and shown == expected, watched.stderr
    assert shown[0].split(": UserWarning")[0].endswith("train.py:4"), shown
