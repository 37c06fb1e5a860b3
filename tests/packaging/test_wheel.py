"""What `pip install trainguard` installs: the linter with no heavy dependency, the rule pages as
package data, and the loop, sanitizer and instruments only with the `torch` extra.

The wheel is built from a copy of the checkout (nothing left behind in it) with the hatchling
already installed (no download), then installed into a fresh venv without torch.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from trainguard.catalog import CATALOG
from trainguard.urls import project_urls

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
HEAVY = {"torch", "numpy", "pillow", "scikit-learn", "rich", "matplotlib"}

LEAK = ("import torch\n"
        "model = torch.nn.Linear(2, 1)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "total = 0\n"
        "for x in [torch.ones(1, 2)] * 3:\n"
        "    loss = model(x).sum()\n"
        "    opt.zero_grad()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    total += loss\n"
        "print(total)\n")


def _name(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9._-]+", requirement).group(0).lower()


def test_pyproject_keeps_heavy_dependencies_in_the_torch_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert {_name(r) for r in project["dependencies"]} <= {"tomli"}
    assert all("python_version < '3.11'" in r for r in project["dependencies"])
    assert {_name(r) for r in project["optional-dependencies"]["torch"]} == HEAVY
    assert {"Documentation", "Issues"} <= set(project["urls"])
    assert project_urls() == project["urls"]


def test_readme_commands_and_ci_install_the_torch_extra() -> None:
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"```bash\n(python -m pip install torch==2\.13\.0 && .*)\n```", readme)
    assert commands == [
        'python -m pip install torch==2.13.0 && python -m pip install ".[torch]" '
        "&& trainguard train",
        'python -m pip install torch==2.13.0 && python -m pip install -e ".[torch,dev]" '
        "&& python -m pytest",
    ]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install --quiet torch==2.13.0\n" in ci
    assert 'pip install --quiet -e ".[torch,dev]"\n' in ci and "\npython -m pytest\n" in ci


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("checkout")
    for name in ("pyproject.toml", "README.md", ".gitignore"):
        shutil.copy2(ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    shutil.copytree(ROOT / "src", source / "src", ignore=ignore)
    shutil.copytree(ROOT / "docs" / "rules", source / "docs" / "rules")
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--quiet", "--wheel-dir", str(out), str(source)],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (built,) = out.glob("trainguard-*.whl")
    return built


def _metadata(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return archive.read(name).decode().splitlines()


@pytest.mark.slow
def test_wheel_declares_no_heavy_dependency_outside_the_torch_extra(wheel: Path) -> None:
    from packaging.requirements import Requirement  # hatchling's own dependency

    requires = [Requirement(line.split(":", 1)[1].strip()) for line in _metadata(wheel)
                if line.startswith("Requires-Dist:")]
    plain = [r for r in requires if "extra" not in str(r.marker)]
    assert [(r.name, str(r.marker)) for r in plain] == [("tomli", 'python_version < "3.11"')]
    for_torch = {r.name for r in requires if r.marker and r.marker.evaluate({"extra": "torch"})}
    assert for_torch - {"tomli"} == HEAVY
    urls = [line for line in _metadata(wheel) if line.startswith("Project-URL:")]
    assert f"Project-URL: Documentation, {project_urls()['Documentation']}" in urls


@pytest.mark.slow
def test_wheel_ships_every_rule_page(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        for code in CATALOG:
            shipped = archive.read(f"trainguard/docs/rules/{code}.md").decode()
            assert shipped == (ROOT / "docs" / "rules" / f"{code}.md").read_text(), code


@pytest.mark.slow
def test_lint_and_rule_run_from_the_wheel_in_a_venv_without_torch(wheel: Path,
                                                                  tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "--no-index", "--quiet", str(wheel)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    exe = python.parent / "trainguard"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    (tmp_path / "train.py").write_text(LEAK)

    def trainguard(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(exe), *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=120)

    no_torch = subprocess.run([str(python), "-c", "import torch"], capture_output=True,
                              env=env, timeout=60)
    assert no_torch.returncode != 0  # the venv really has no torch
    where = subprocess.run([str(python), "-c", "import trainguard; print(trainguard.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout  # not the checkout

    lint = trainguard("lint", "train.py")
    assert lint.returncode == 1, lint.stderr
    assert lint.stdout.startswith("train.py:10:5: TG201 graph-kept-across-steps:")

    as_json = trainguard("lint", "train.py", "--format", "json")
    assert f'"helpUri": "{CATALOG["TG201"].help_uri}"' in as_json.stdout  # from the metadata

    rule = trainguard("rule", "TG101")
    assert rule.returncode == 0, rule.stderr
    assert rule.stdout == (ROOT / "docs" / "rules" / "TG101.md").read_text()

    train = trainguard("train", "--epochs", "1")
    assert train.returncode == 2, train.stderr
    assert "needs torch, which is not installed" in train.stderr
    assert 'python -m pip install "trainguard[torch]"' in train.stderr
    assert "Traceback" not in train.stderr
