"""The fixture-driven driver: every ``cases/<case>/buggy.py`` must yield exactly the codes marked
on its lines, and every ``fixed.py`` nothing at all.

Mark a line that must fire with a trailing ``# expect: TG201`` (several: ``# expect: TG101, TG103``).
A case folder holds ``buggy.py`` and its ``fixed.py`` twin; a folder with only ``fixed.py`` is a
correct program that must stay silent. Each script runs in this process under a fresh watcher, as
``trainguard run`` would run it. Every case cites, at its top, the real report it is modelled on.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sanitize_helpers import CASES, run_in_process

_EXPECT = re.compile(r"#\s*expect:\s*(TG\d{3}(?:\s*,\s*TG\d{3})*)")


def expected_findings(script: Path) -> set[tuple[str, int]]:
    """``{(code, line)}`` marked in ``script``."""
    out = set()
    for number, line in enumerate(script.read_text().splitlines(), start=1):
        m = _EXPECT.search(line)
        if m:
            out.update((c.strip(), number) for c in m.group(1).split(","))
    return out


def _scripts(name: str) -> list[Path]:
    return sorted(CASES.glob(f"*/{name}"))


def _seen(watcher, script: Path) -> tuple[set[tuple[str, int]], list[str]]:
    here, elsewhere = set(), []
    for f in watcher.findings:
        if Path(f.path).resolve() == script.resolve():
            here.add((f.code, f.line))
        else:
            elsewhere.append(f.format())
    return here, elsewhere


def test_every_case_is_complete():
    for folder in sorted(p for p in CASES.iterdir() if p.is_dir()):
        buggy, fixed = folder / "buggy.py", folder / "fixed.py"
        assert fixed.is_file(), f"{folder.name}: every case needs a fixed.py twin"
        if buggy.is_file():
            assert expected_findings(buggy), f"{folder.name}/buggy.py marks no `# expect:` line"
        assert not expected_findings(fixed), f"{folder.name}/fixed.py must not expect findings"
        head = (buggy if buggy.is_file() else fixed).read_text()[:1200]
        assert "http" in head, f"{folder.name}: cite the report the case is modelled on"


@pytest.mark.parametrize("script", _scripts("buggy.py"), ids=lambda p: p.parent.name)
def test_buggy_case_fires_exactly_where_marked(script):
    watcher, status, stderr = run_in_process(script)
    here, elsewhere = _seen(watcher, script)
    assert not elsewhere, f"findings outside the script: {elsewhere}"
    assert here == expected_findings(script), stderr


@pytest.mark.parametrize("script", _scripts("fixed.py"), ids=lambda p: p.parent.name)
def test_fixed_case_is_silent(script):
    watcher, status, stderr = run_in_process(script)
    assert status == 0, stderr
    assert not watcher.findings, stderr
