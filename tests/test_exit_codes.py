"""Exit statuses: every error a user can cause exits 2 and names the argument, file or key; exit 3
is trainguard's own bug and says where to report it; every flag's help line shows its default
once."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pytest

from trainguard import cli
from trainguard.urls import issues_url

SCRIPT = "import torch\nmodel = torch.nn.Linear(2, 1)\nloss = model(torch.ones(1, 2)).sum()\n"

FILES = {
    "ok.py": SCRIPT,
    "syn.py": "import torch\nloss = (1 +\n",
    "fails.py": "raise ValueError('the data is missing')\n",
    "cfg_int/pyproject.toml": "[tool.trainguard]\nselect = 5\n",
    "cfg_table/pyproject.toml": '[tool.trainguard]\nper-file-ignores = "tests/*"\n',
    "cfg_toml/pyproject.toml": "[tool.trainguard\n",
    "cfg_key/pyproject.toml": '[tool.trainguard]\nselct = ["TG2"]\n',
}

# (argv, what the message must name); every row must exit 2 and write nothing.
BAD_INPUTS = [
    # lint
    (["lint", "missing.py"], "missing.py: no such file or folder"),
    (["lint", "ok.py", "--select", "XX9"], "--select: 'XX9' matches no trainguard code"),
    (["lint", "ok.py", "--format", "xml"], "argument --format: invalid choice: 'xml'"),
    (["lint", "cfg_int"], "pyproject.toml [tool.trainguard] select: expected a list"),
    (["lint", "cfg_table"], "pyproject.toml [tool.trainguard]: per-file-ignores must be a table"),
    (["lint", "cfg_toml"], "pyproject.toml: cannot read [tool.trainguard]"),
    (["lint", "cfg_key"], "pyproject.toml: unknown key(s) in [tool.trainguard]: selct"),
    # run
    (["run"], "give a script to run"),
    (["run", "missing.py"], "no such script 'missing.py'"),
    (["run", "-m"], "-m needs a module name"),
    (["run", "--report", "nodir/r.json", "ok.py"],
     "argument --report: nodir/r.json: folder nodir does not exist"),
    (["run", "--report", "adir", "ok.py"], "argument --report: adir is a folder"),
    (["run", "--ignore", "TGX", "ok.py"], "--ignore: 'TGX' matches no trainguard code"),
    # check
    (["check", "missing.py"], "no such script: missing.py"),
    (["check", "--report", "nodir/r.json", "ok.py"], "argument --report: nodir/r.json: folder"),
    (["check", "--select", "ZZ", "ok.py"], "--select: 'ZZ' matches no trainguard code"),
    # graph
    (["graph", "ok.py", "--tensor", "loss", "--args", "'open"],
     "argument --args: cannot split \"'open\" into arguments: no closing quotation"),
    (["graph", "ok.py", "--tensor", "loss", "-o", "nodir/g.dot"],
     "argument -o/--output: nodir/g.dot: folder nodir does not exist"),
    (["graph", "ok.py", "--tensor", "loss", "-o", "g.txt"],
     "argument -o/--output: g.txt: use a file name ending in .dot"),
    (["graph", "ok.py", "--tensor", "loss", "--depth", "0"],
     "argument --depth: must be 1 or more, got 0"),
    (["graph", "ok.py", "--tensor", "loss", "--max-nodes", "x"],
     "argument --max-nodes: expected an integer, got 'x'"),
    (["graph", "ok.py", "--tensor", "nope"], "--tensor nope: ok.py has no global variable 'nope'"),
    (["graph", "missing.py", "--tensor", "loss"], "missing.py: no such file"),
    # explain
    (["explain", "syn.py", "--tensor", "loss"], "syn.py:2: "),
    (["explain", "latin.py", "--tensor", "loss"], "latin.py: cannot read it as Python source"),
    (["explain", "ok.py", "--tensor", "loss", "--model", "net"], "--model net: ok.py has no"),
    (["explain", "fails.py", "--tensor", "loss"],
     "fails.py raised ValueError: the data is missing"),
    (["explain", "ok.py", "--tensor", "loss", "--args", "a\\"],
     "argument --args: cannot split"),
    # env
    (["env", "--format", "xml"], "argument --format: invalid choice: 'xml'"),
    # rule
    (["rule", "TG999"], "'TG999' is not a trainguard code or name"),
    (["rule"], "give a code such as TG201"),
    (["rule", "TG201", "--all"], "either a code (TG201) or --all"),
    # the command itself
    (["nosuch"], "argument COMMAND: invalid choice: 'nosuch'"),
    # train (its own parser; listed here because it already exits 2 on these)
    (["train", "--epochs", "0"], "argument --epochs: must be > 0, got 0"),
    (["train", "--data", "csv"], "--data csv needs --csv FILE"),
]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "latin.py").write_bytes(b"import torch\nname = '\xe9t\xe9'\n")  # no coding line
    (tmp_path / "adir").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _tree(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if "__pycache__" not in p.parts}


@pytest.mark.parametrize("argv, named", BAD_INPUTS, ids=[" ".join(a) for a, _ in BAD_INPUTS])
def test_bad_input_exits_2_naming_the_cause(workdir: Path, capsys: pytest.CaptureFixture[str],
                                            argv: list[str], named: str) -> None:
    before = _tree(workdir)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert named in err
    assert "internal error" not in err
    assert _tree(workdir) == before, "a failed command must leave nothing behind"


def test_the_table_covers_every_command_with_20_inputs() -> None:
    assert len(BAD_INPUTS) >= 20
    commands = {argv[0] for argv, _ in BAD_INPUTS if argv}
    assert {"lint", "run", "check", "graph", "explain", "env", "rule"} <= commands


def test_a_bug_in_trainguard_exits_3_and_says_where_to_report_it(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import trainguard.rule

    def broken(args: argparse.Namespace) -> int:
        raise KeyError("a lookup trainguard got wrong")

    monkeypatch.setattr(trainguard.rule, "run", broken)
    assert cli.main(["rule", "TG201"]) == 3
    err = capsys.readouterr().err
    assert "KeyError: 'a lookup trainguard got wrong'" in err  # the traceback
    url = issues_url()
    assert url and url.startswith("https://") and f"please report it at {url}" in err
    assert "internal error (exit 3): this is a bug in trainguard" in err


def test_a_command_without_the_torch_extra_exits_2_naming_it(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` fails as if not installed
    assert cli.main(["env"]) == 2
    err = capsys.readouterr().err
    assert "this command needs torch, which is not installed" in err
    assert 'python -m pip install "trainguard[torch]"' in err


def test_a_missing_module_outside_the_extra_is_a_bug(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import trainguard.rule

    def broken(args: argparse.Namespace) -> int:
        import trainguard_no_such_helper  # noqa: F401

        return 0

    monkeypatch.setattr(trainguard.rule, "run", broken)
    assert cli.main(["rule", "TG201"]) == 3
    assert "internal error (exit 3)" in capsys.readouterr().err


# train and predict have their own parser and help conventions
HELP_EXEMPT = {"train", "predict"}


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {name: sub for name, sub in action.choices.items() if name not in HELP_EXEMPT}


@pytest.mark.parametrize("command", sorted(_subparsers()))
def test_every_flag_has_help_and_its_default_once(command: str) -> None:
    sub = _subparsers()[command]
    formatter = sub._get_formatter()
    for action in sub._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        name = "/".join(action.option_strings) or action.dest
        assert action.help and action.help.strip(), f"{command} {name}: no help line"
        shown = formatter._expand_help(action)  # the help line as --help prints it
        assert len(re.findall(r"\bdefault\b", shown)) <= 1, f"{command} {name}: {shown}"
        if action.default not in (None, False, argparse.SUPPRESS):
            assert "default" in shown, f"{command} {name}: default {action.default!r} not shown"


def test_help_renders_for_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ["", *sorted(_subparsers())]:
        argv = [command, "--help"] if command else ["--help"]
        assert cli.main(argv) == 0
        out = capsys.readouterr().out
        assert "(default: None)" not in out and out.count("usage:") == 1
