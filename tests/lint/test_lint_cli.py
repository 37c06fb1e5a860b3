"""``trainguard lint`` end to end: write files into a temp dir, run the CLI, match the output."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from tests.conftest import cli_env, run_cli
from trainguard.catalog import lookup

LEAK = textwrap.dedent("""\
    import torch
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    total = 0
    for step in range(3):
        opt.zero_grad()
        loss = model(torch.randn(4, 2)).pow(2).mean()
        loss.backward()
        opt.step()
        total += loss
    print(f"{total / 3:.3f}")
""")
CLEAN = "import torch\nprint(torch.zeros(2))\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(LEAK)
    (tmp_path / "ok.py").write_text(CLEAN)
    return tmp_path


def test_text_output_and_exit_codes(project: Path) -> None:
    r = run_cli("lint", "train.py", cwd=project)
    assert r.returncode == 1, r.stderr
    assert r.stdout.strip() == (
        "train.py:10:5: TG201 graph-kept-across-steps: `total += loss` keeps the autograd graph "
        "of every iteration alive through `total`, which outlives the loop and never reaches "
        "backward (fix: accumulate loss.item() instead)")
    assert run_cli("lint", "ok.py", cwd=project).returncode == 0
    missing = run_cli("lint", "nope.py", cwd=project)
    assert missing.returncode == 2 and "nope.py: no such file or folder" in missing.stderr
    bad = run_cli("lint", "train.py", "--select", "E501", cwd=project)
    assert bad.returncode == 2 and "--select" in bad.stderr


def test_json_keeps_the_catalogue_shape(project: Path) -> None:
    r = run_cli("lint", "train.py", "--format", "json", cwd=project)
    data = json.loads(r.stdout)
    assert list(data) == ["findings"]
    f = data["findings"][0]
    assert {k: f[k] for k in ("code", "name", "layer", "path", "line", "col", "count")} == {
        "code": "TG201", "name": "graph-kept-across-steps", "layer": "lint", "path": "train.py",
        "line": 10, "col": 5, "count": 1}
    assert f["docs"] == "trainguard rule TG201" and f["why"] and f["fix"]
    assert f["helpUri"] == lookup("TG201").help_uri and f["helpUri"].startswith("https://")


def test_sarif_and_github(project: Path) -> None:
    sarif = json.loads(run_cli("lint", "train.py", "--format", "sarif", cwd=project).stdout)
    assert sarif["version"] == "2.1.0"
    run = sarif["runs"][0]
    assert run["tool"]["driver"]["rules"][0]["id"] == "TG201"
    result = run["results"][0]
    assert result["ruleId"] == "TG201"
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 10
    gh = run_cli("lint", "train.py", "--format", "github", cwd=project).stdout
    assert gh.startswith("::error file=train.py,line=10,col=5,")
    assert "title=TG201 graph-kept-across-steps::" in gh


def test_statistics(project: Path) -> None:
    r = run_cli("lint", ".", "--statistics", cwd=project)
    assert r.stdout.strip().splitlines()[-1].split() == ["1", "TG201", "graph-kept-across-steps"]
    as_json = run_cli("lint", ".", "--statistics", "--format", "json", cwd=project)
    assert len(json.loads(as_json.stdout)["findings"]) == 1
    assert as_json.stderr.split() == ["1", "TG201", "graph-kept-across-steps"]


def test_stdin(project: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "trainguard", "lint", "-", "--stdin-filename",
                        "piped.py"], input=LEAK, capture_output=True, text=True, env=cli_env())
    assert r.returncode == 1 and r.stdout.startswith("piped.py:10:5: TG201")


@pytest.mark.parametrize("comment", ["# noqa: TG201", "# trainguard: ignore[TG201]",
                                     "# trainguard: ignore", "# noqa: TG2"])
def test_suppression_comments(tmp_path: Path, comment: str) -> None:
    (tmp_path / "t.py").write_text(LEAK.replace("total += loss", f"total += loss  {comment}"))
    assert run_cli("lint", "t.py", cwd=tmp_path).returncode == 0


def test_pyproject_select_ignore_exclude_per_file(project: Path) -> None:
    (project / "vendor").mkdir()
    (project / "vendor" / "leak.py").write_text(LEAK)
    (project / "scripts").mkdir()
    (project / "scripts" / "leak.py").write_text(LEAK)
    (project / "pyproject.toml").write_text(
        '[tool.trainguard]\nexclude = ["vendor"]\n'
        'per-file-ignores = { "scripts/*" = ["TG2"] }\n')
    r = run_cli("lint", ".", cwd=project)
    assert [line.split(":")[0] for line in r.stdout.splitlines()] == ["train.py"]
    (project / "pyproject.toml").write_text('[tool.trainguard]\nignore = ["TG201"]\n')
    assert run_cli("lint", ".", cwd=project).returncode == 0
    assert run_cli("lint", ".", "--ignore", "TG7", cwd=project).returncode == 1
    (project / "pyproject.toml").write_text('[tool.trainguard]\nselect = ["TG7"]\n')
    assert run_cli("lint", ".", cwd=project).returncode == 0


def test_folders_skip_gitignore_and_usual_folders(tmp_path: Path) -> None:
    for rel in ("train.py", "gen/out.py", "venv/lib.py", "build/x.py", "node_modules/a.py",
                "keep/gen/ok.py", "logs/run.py", "logs/keep.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(LEAK)
    (tmp_path / ".gitignore").write_text("# generated\n/gen/\nlogs/*\n!logs/keep.py\n")
    r = run_cli("lint", ".", cwd=tmp_path)
    paths = sorted(line.split(":")[0] for line in r.stdout.splitlines())
    assert paths == ["keep/gen/ok.py", "logs/keep.py", "train.py"]


def _notebook(cells: list[tuple[str, str]]) -> str:
    return json.dumps({"cells": [{"cell_type": kind, "metadata": {}, "source": src.splitlines(True),
                                  **({"outputs": [], "execution_count": None}
                                     if kind == "code" else {})} for kind, src in cells],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def test_notebook_cells_lines_and_magics(tmp_path: Path) -> None:
    (tmp_path / "nb.ipynb").write_text(_notebook([
        ("markdown", "# Training"),
        ("code", "%matplotlib inline\n!pip install torch\nimport torch\n"),
        ("code", "%%bash\necho this is not python (\n"),
        ("code", "files = !ls\nstate = torch.load('w.pt', weights_only=False)\n"),
    ]))
    r = run_cli("lint", "nb.ipynb", "--format", "json", cwd=tmp_path)
    found = json.loads(r.stdout)["findings"]
    assert [(f["code"], f["cell"], f["line"], f["col"]) for f in found] == [("TG701", 4, 2, 9)]
    text = run_cli("lint", "nb.ipynb", cwd=tmp_path).stdout
    assert text.startswith("nb.ipynb[cell 4]:2:9: TG701")


def test_notebook_magic_as_the_only_statement_of_a_block(tmp_path: Path) -> None:
    # Modelled on yolov5's tutorial.ipynb: `%pip install` / `%load_ext` inside if/elif branches.
    (tmp_path / "nb.ipynb").write_text(_notebook([
        ("code", "logger = 'TensorBoard'\nif logger == 'Comet':\n  %pip install -q comet_ml\n"
                 "elif logger == 'TensorBoard':\n  %load_ext tensorboard\n"
                 "  %tensorboard --logdir runs/train\n"),
        ("code", "import torch\n"),
    ]))
    r = run_cli("lint", "nb.ipynb", cwd=tmp_path)
    assert r.returncode == 0, r.stdout


def test_notebook_syntax_error_names_the_cell(tmp_path: Path) -> None:
    (tmp_path / "nb.ipynb").write_text(_notebook([("code", "x = 1\n"), ("code", "def f(:\n")]))
    r = run_cli("lint", "nb.ipynb", cwd=tmp_path)
    assert r.returncode == 1 and r.stdout.startswith("nb.ipynb[cell 2]:1:")
    assert "TG001 syntax-error" in r.stdout


def test_syntax_error_is_one_finding_and_others_go_on(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def f(:\n")
    (tmp_path / "b.py").write_text(LEAK)
    r = run_cli("lint", ".", cwd=tmp_path)
    codes = [line.split()[1] for line in r.stdout.splitlines()]
    assert codes == ["TG001", "TG201"] and r.returncode == 1


def test_a_failing_rule_is_reported_and_the_others_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainguard.lint import engine, lint_text

    broken = types.SimpleNamespace(CODE="TG105", check=lambda script: 1 / 0)
    rules = dict(engine.all_rules())
    rules["TG105"] = broken
    monkeypatch.setattr(engine, "all_rules", lambda: rules)
    found = lint_text(LEAK, path="t.py")
    assert [f.code for f in found] == ["TG002", "TG201"]
    assert "rule TG105 failed on this file: ZeroDivisionError" in found[0].message


def test_internal_error_exits_3(monkeypatch: pytest.MonkeyPatch, project: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    from trainguard import cli
    from trainguard.lint import runner

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(runner, "lint_paths", boom)
    assert cli.main(["lint", str(project / "train.py")]) == 3
    assert "internal error (exit 3)" in capsys.readouterr().err


def test_fix_diff_and_unsafe_fixes(tmp_path: Path) -> None:
    src = LEAK + "state = torch.load('w.pt', weights_only=False)\n"
    target = tmp_path / "t.py"
    target.write_text(src)
    diff = run_cli("lint", "t.py", "--diff", cwd=tmp_path)
    assert diff.returncode == 1 and target.read_text() == src
    safer = "+state = torch.load('w.pt', weights_only=True)"
    assert "+    total += loss.item()" in diff.stdout and safer not in diff.stdout
    unsafe = run_cli("lint", "t.py", "--diff", "--unsafe-fixes", cwd=tmp_path)
    assert safer in unsafe.stdout
    fixed = run_cli("lint", "t.py", "--fix", cwd=tmp_path)
    assert "total += loss.item()" in target.read_text()
    assert fixed.returncode == 1 and "TG701" in fixed.stdout and "TG201" not in fixed.stdout
    run_cli("lint", "t.py", "--fix", "--unsafe-fixes", cwd=tmp_path)
    assert "weights_only=True" in target.read_text()
    assert run_cli("lint", "t.py", cwd=tmp_path).returncode == 0


def test_lint_never_imports_torch_numpy_or_matplotlib(project: Path) -> None:
    code = ("import sys\nfrom trainguard.cli import main\n"
            "rc = main(['lint', 'train.py', '--format', 'json'])\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'numpy', 'matplotlib', 'libcst'))\n"
            "print('RESULT', rc, heavy, file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True,
                       env=cli_env())
    line = next(line for line in r.stderr.splitlines() if line.startswith("RESULT"))
    _, rc, heavy = line.split(" ", 2)
    # (how fast lint starts is measured by benchmarks/lint_tree.py, not asserted here)
    assert int(rc) == 1 and heavy == "[]"


def test_help_imports_no_rule() -> None:
    code = ("import sys\nfrom trainguard.cli import build_parser\nbuild_parser()\n"
            "print(sorted(m for m in sys.modules if m.startswith('trainguard.lint')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=cli_env())
    assert r.stdout.strip() == "['trainguard.lint', 'trainguard.lint.cli']"


def test_test_files_are_not_training_runs(tmp_path: Path) -> None:
    leak_and_dropout = LEAK + textwrap.dedent("""\
        import torch.nn.functional as F


        class Net(torch.nn.Module):
            def forward(self, x):
                return F.dropout(x, 0.5)
    """)
    (tmp_path / "test_training.py").write_text(leak_and_dropout)
    (tmp_path / "train.py").write_text(leak_and_dropout)
    r = run_cli("lint", ".", cwd=tmp_path)
    found = sorted((line.split(":")[0], line.split()[1]) for line in r.stdout.splitlines())
    assert found == [("test_training.py", "TG105"), ("train.py", "TG105"), ("train.py", "TG201")]


def test_notebook_recall_eval_after_training_across_cells(tmp_path: Path) -> None:
    # Modelled on udacity/deep-learning-v2-pytorch#399: an MLP with Dropout trained in one cell
    # and tested in a later one without model.eval() (and here without no_grad either).
    (tmp_path / "mlp.ipynb").write_text(_notebook([
        ("code", "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"),
        ("code", "model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Dropout(0.2),\n"
                 "                      nn.Linear(256, 10))\n"
                 "optimizer = torch.optim.SGD(model.parameters(), lr=0.01)\n"
                 "train_loader = [(torch.randn(8, 784), torch.randint(0, 10, (8,)))]\n"
                 "test_loader = train_loader\n"),
        ("markdown", "## Train"),
        ("code", "%%time\nfor epoch in range(2):\n    for data, target in train_loader:\n"
                 "        optimizer.zero_grad()\n"
                 "        loss = F.cross_entropy(model(data), target)\n"
                 "        loss.backward()\n        optimizer.step()\n"),
        ("code", "correct = 0\nfor data, target in test_loader:\n"
                 "    output = model(data)\n"
                 "    correct += (output.argmax(1) == target).sum().item()\n"),
    ]))
    r = run_cli("lint", "mlp.ipynb", "--format", "json", cwd=tmp_path)
    found = [(f["code"], f["cell"], f["line"]) for f in json.loads(r.stdout)["findings"]]
    assert found == [("TG101", 5, 1), ("TG103", 5, 3)]


def test_unsafe_fix_removes_only_a_written_softmax(tmp_path: Path) -> None:
    src = textwrap.dedent("""\
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 3)

            def forward(self, x):
                return F.softmax(self.fc(x), dim=1)


        model = Net()
        x, y = torch.randn(4, 8), torch.randint(0, 3, (4,))
        a = F.cross_entropy(model.fc(x).softmax(dim=1), y)
        b = F.cross_entropy(model(x), y)
    """)
    (tmp_path / "t.py").write_text(src)
    r = run_cli("lint", "t.py", "--fix", "--unsafe-fixes", cwd=tmp_path)
    fixed = (tmp_path / "t.py").read_text()
    assert "a = F.cross_entropy(model.fc(x), y)" in fixed
    assert "b = F.cross_entropy(model(x), y)" in fixed
    assert [line.split()[1] for line in r.stdout.splitlines()] == ["TG401"]


def test_source_encodings_are_read_as_python_reads_them(tmp_path: Path) -> None:
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbfimport torch\n"
                                      b"state = torch.load('w.pt', weights_only=False)\n")
    (tmp_path / "latin.py").write_bytes(b"# -*- coding: latin-1 -*-\nname = 'caf\xe9'\n")
    r = run_cli("lint", ".", cwd=tmp_path)
    assert [line.split(": ")[0:2] for line in r.stdout.splitlines()] == [
        ["bom.py:2:9", "TG701 unsafe-torch-load"]]
