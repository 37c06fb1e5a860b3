"""Models built in another file of the project: TG101/TG102 follow the import to the class or
factory and read its code for Dropout/BatchNorm (``projects/helper_model``)."""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

from trainguard.config import Config
from trainguard.lint import lint_text
from trainguard.lint.project import imported_builder
from trainguard.lint.runner import lint_paths
from trainguard.lint.script import Script

PROJECT = Path(__file__).parent / "projects" / "helper_model"
_EXPECT = re.compile(r"#\s*expect:\s*(TG\d{3})")


def _marked() -> set[tuple[str, int, str]]:
    out = set()
    for path in PROJECT.rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            m = _EXPECT.search(line)
            if m:
                out.add((path.relative_to(PROJECT).as_posix(), number, m.group(1)))
    return out


def test_the_project_fires_exactly_where_marked(monkeypatch):
    monkeypatch.chdir(PROJECT)
    found = {(Path(f.path).as_posix(), f.line, f.code)
             for f in lint_paths(["."], config=Config()).findings}
    assert found == _marked()
    assert {c for _, _, c in found} == {"TG101"}


def test_one_file_named_alone_still_sees_its_helper(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # resolution follows the file, not the current folder
    path = os.path.relpath(PROJECT / "train.py")
    findings = lint_paths([path], config=Config()).findings
    assert [(f.code, f.line) for f in findings] == [("TG101", 17)]
    assert "trained just before" in findings[0].message


def test_text_without_a_file_resolves_nothing():
    text = (PROJECT / "train.py").read_text()
    assert lint_text(text, path="<string>") == []


def _write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def _builder(script_path: Path, name: str):
    import ast

    text = script_path.read_text()
    script = Script(source=text, path=str(script_path), tree=ast.parse(text))
    from trainguard.lint.project import import_specs

    return imported_builder(str(script_path), import_specs(script.tree.body), name)


def test_only_the_code_the_model_is_built_with_counts(tmp_path):
    _write(tmp_path, {
        "helpers.py": """\
            import torch.nn as nn

            class Plain(nn.Module):
                def forward(self, x):
                    return x

            class Noisy(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.drop = nn.Dropout(0.5)

            def make_plain():
                return Plain()

            def make_noisy():
                return Noisy()

            def load_noisy(path):
                m = Noisy()
                m.eval()
                return m
            """,
        "train.py": "from helpers import make_plain, make_noisy, load_noisy, Noisy\n",
    })
    script = tmp_path / "train.py"
    plain, noisy = _builder(script, "make_plain"), _builder(script, "make_noisy")
    assert (plain.kind, plain.mode_dependent) == ("function", False)
    assert (noisy.kind, noisy.mode_dependent, noisy.sets_mode) == ("function", True, False)
    assert _builder(script, "load_noisy").sets_mode
    assert _builder(script, "Noisy").kind == "class"
    assert _builder(script, "print") is None and _builder(script, "missing") is None


def test_absolute_imports_resolve_up_to_the_project_root_and_not_beyond(tmp_path):
    _write(tmp_path, {
        "outside/models.py": "import torch.nn as nn\ndef make():\n    return nn.Dropout(0.1)\n",
        "proj/pyproject.toml": "",
        "proj/lib/models.py": "import torch.nn as nn\ndef make():\n    return nn.Dropout(0.1)\n",
        "proj/lib/__init__.py": "",
        "proj/scripts/train.py": "from lib.models import make\nfrom models import make as m2\n",
    })
    script = tmp_path / "proj" / "scripts" / "train.py"
    found = _builder(script, "make")
    assert found is not None and found.path == str(tmp_path / "proj" / "lib" / "models.py")
    assert found.mode_dependent
    assert _builder(script, "m2") is None  # outside/ is not above the script within the project


def test_an_edited_helper_is_read_again(tmp_path):
    _write(tmp_path, {"net.py": "def make():\n    return 1\n", "train.py": "from net import make\n"})
    script = tmp_path / "train.py"
    assert not _builder(script, "make").mode_dependent
    helper = tmp_path / "net.py"
    helper.write_text("import torch.nn as nn\ndef make():\n    return nn.BatchNorm1d(4)\n")
    stat = helper.stat()
    os.utime(helper, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert _builder(script, "make").mode_dependent
