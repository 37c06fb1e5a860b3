"""Every docs entry's Example must fire its code and its Use instead must stay silent, so the
docs cannot drift from the rules (the practice pylint applies to its own docs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trainguard.catalog import CATALOG
from trainguard.lint import lint_text

DOCS = Path(__file__).resolve().parents[2] / "docs" / "rules"
SECTIONS = ["What it does", "Why is this bad", "Example", "Use instead", "Fix safety",
            "References"]
CODES = sorted(c for c, e in CATALOG.items() if e.static)


def _section(text: str, title: str) -> str:
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert m, f"section {title!r} missing"
    return m.group(1)


def _python_block(section: str) -> str | None:
    m = re.search(r"```python\n(.*?)```", section, re.S)
    return m.group(1) if m else None


@pytest.mark.parametrize("code", CODES)
def test_docs_entry_has_the_fixed_sections(code: str) -> None:
    text = (DOCS / f"{code}.md").read_text()
    assert text.startswith(f"# {code} {CATALOG[code].name}\n")
    positions = [text.index(f"\n## {s}\n") for s in SECTIONS]
    assert positions == sorted(positions), "sections out of order"
    assert "http" in _section(text, "References")


@pytest.mark.parametrize("code", [c for c in CODES if c != "TG002"])
def test_docs_example_fires_and_use_instead_is_silent(code: str) -> None:
    text = (DOCS / f"{code}.md").read_text()
    bad = _python_block(_section(text, "Example"))
    good = _python_block(_section(text, "Use instead"))
    assert bad is not None and good is not None
    assert code in {f.code for f in lint_text(bad, path=f"{code}-example.py")}
    silent = lint_text(good, path=f"{code}-use-instead.py")
    assert not silent, "\n".join(f.format() for f in silent)
