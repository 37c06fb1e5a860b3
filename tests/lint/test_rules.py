"""One driver for every rule's fixtures.

``fixtures/<CODE>[-topic]/buggy*.py`` marks each line that must fire with a trailing
``# expect: TG201`` (several codes comma-separated); every finding must be marked and every mark
must fire, whatever the code. ``clean*.py`` must stay silent: the near-misses of the catalogue's
"what must not fire".
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trainguard.catalog import CATALOG
from trainguard.lint import lint_text

FIXTURES = Path(__file__).parent / "fixtures"
_EXPECT = re.compile(r"#\s*expect:\s*(TG\d{3}(?:\s*,\s*TG\d{3})*)")

CASES = sorted(p for p in FIXTURES.glob("*/*.py") if p.name.startswith(("buggy", "clean")))


def expected(text: str) -> set[tuple[int, str]]:
    out = set()
    for number, line in enumerate(text.splitlines(), start=1):
        m = _EXPECT.search(line)
        if m:
            out.update((number, c.strip()) for c in m.group(1).split(","))
    return out


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture(path: Path) -> None:
    text = path.read_text()
    found = {(f.line, f.code) for f in lint_text(text, path=str(path))}
    want = expected(text)
    if path.name.startswith("clean"):
        assert not want, "clean fixtures carry no expect marks"
    detail = "\n".join(f.format() for f in lint_text(text, path=path.name))
    assert found == want, f"missing {sorted(want - found)}, unexpected {sorted(found - want)}\n" \
                          f"{detail}"


def test_every_static_code_has_buggy_and_clean_fixtures() -> None:
    for code, entry in CATALOG.items():
        if not entry.static or code == "TG002":
            continue
        folders = list(FIXTURES.glob(f"{code}*"))
        assert any(list(f.glob("buggy*.py")) for f in folders), f"{code}: no buggy fixture"
        assert code == "TG001" or any(list(f.glob("clean*.py")) for f in folders), \
            f"{code}: no clean fixture"
        marks = set()
        for f in folders:
            for b in f.glob("buggy*.py"):
                marks |= {c for _, c in expected(b.read_text())}
        assert code in marks, f"{code}: no fixture line expects it"
