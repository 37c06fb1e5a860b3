"""The linter and the sanitizer agree on correct programs: lint reports nothing on the fixed
twin of any runtime case (``tests/sanitize/cases/*/fixed*.py``) nor on any lint fixture's
clean file. A lint finding there is a false alarm one of the two layers disagrees with."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainguard.lint import lint_text

TESTS = Path(__file__).resolve().parents[1]
CORRECT = sorted([*TESTS.glob("sanitize/cases/*/fixed*.py"),
                  *TESTS.glob("lint/fixtures/*/clean*.py")])


def test_there_are_programs_to_compare() -> None:
    assert len([p for p in CORRECT if "sanitize" in p.parts]) >= 80
    assert len([p for p in CORRECT if "fixtures" in p.parts]) >= 30


@pytest.mark.parametrize("path", CORRECT, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_lint_is_silent_on_correct_programs(path: Path) -> None:
    found = lint_text(path.read_text(), path=str(path))
    assert not found, "\n".join(f.format() for f in found)
