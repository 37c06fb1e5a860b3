"""docs/sanitizer.md's "How to write a check", followed on a copy of this checkout.

The page's own example, TG206's runtime check, is taken out of a copy (its one check file and one
case folder). Put back as the page says -- the case folder under ``tests/sanitize/cases/``, the
file under ``src/trainguard/sanitize/checks/``, nothing else edited -- the command of the page's
last step fails while only the case is there (TG206 is missed) and passes once the check file is:
the check is discovered by its file name, its case is run by the case driver, and the layout
tests run with them.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "sanitizer.md"
CHECK = Path("src/trainguard/sanitize/checks/tg206_data_attribute.py")
CASE = Path("tests/sanitize/cases/tg206_target_net_shares_storage")


def _copy(to: Path) -> None:
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    for name in ("src", "tests", "docs"):
        shutil.copytree(ROOT / name, to / name, ignore=skip)
    shutil.copy(ROOT / "pyproject.toml", to / "pyproject.toml")


def _last_step(code: str) -> list[str]:
    """The pytest arguments of the page's **Run** step, for ``code`` (``tgNNN``)."""
    section = PAGE.read_text(encoding="utf-8").split("## How to write a check", 1)[1]
    section = section.split("\n## ", 1)[0]
    found = re.search(r"\*\*Run\*\* `python -m pytest ([^`]+)`", section)
    assert found, "'How to write a check' gives no pytest command to run"
    return [a.strip("'\"") for a in re.findall(r"'[^']*'|\"[^\"]*\"|\S+",
                                               found.group(1).replace("tgNNN", code))]


def _pytest(where: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    # -rA lists every test that passed; -n 0: one process (a second level of workers would not
    # speed up the few tests selected)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0",
                           "-rA", *args], cwd=where, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_a_check_is_one_file_and_one_case_folder(tmp_path):
    _copy(tmp_path)
    (tmp_path / CHECK).unlink()
    shutil.rmtree(tmp_path / CASE)
    args = _last_step("tg206")

    shutil.copytree(ROOT / CASE, tmp_path / CASE,
                    ignore=shutil.ignore_patterns("__pycache__"))  # the case folder alone
    missed = _pytest(tmp_path, args)
    assert missed.returncode == 1, missed.stdout[-3000:]
    assert re.search(r"FAILED \S*test_buggy_case_fires_exactly_where_marked\[tg206", missed.stdout)

    shutil.copy(ROOT / CHECK, tmp_path / CHECK)  # and the check file
    done = _pytest(tmp_path, args)
    assert done.returncode == 0, done.stdout[-3000:]
    passed = set(re.findall(r"^PASSED (\S+)", done.stdout, re.M))
    for name in ("test_cases.py::test_buggy_case_fires_exactly_where_marked"
                 "[tg206_target_net_shares_storage]",
                 "test_cases.py::test_fixed_case_is_silent[tg206_target_net_shares_storage]",
                 "test_layout.py::test_no_import_circle_in_sanitize",
                 "test_layout.py::test_checks_import_only_the_core",
                 "test_layout.py::test_module_and_function_sizes"
                 "[trainguard.sanitize.checks.tg206_data_attribute]"):
        assert f"tests/sanitize/{name}" in passed, (name, done.stdout[-3000:])
