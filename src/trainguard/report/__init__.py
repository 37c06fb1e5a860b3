"""Output formats for findings, shared by ``lint`` and ``run``: text, JSON, SARIF, GitHub.

``render(findings, fmt="json")`` gives ``{"findings": [...]}`` with each finding in the
catalogue's shape, so any layer's findings print the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from trainguard.findings import Finding

__all__ = ["render", "FORMATS", "Format", "statistics"]

Format = Literal["text", "json", "sarif", "github"]
FORMATS: tuple[Format, ...] = ("text", "json", "sarif", "github")


def render(findings: Sequence[Finding], fmt: Format = "text", *, tool_version: str = "") -> str:
    """Render findings in one of :data:`FORMATS`.

    Raises:
        ValueError: ``fmt`` is not one of :data:`FORMATS`.
    """
    if fmt == "text":
        from trainguard.report.text import render_text
        return render_text(findings)
    if fmt == "json":
        from trainguard.report.json_format import render_json
        return render_json(findings)
    if fmt == "sarif":
        from trainguard.report.sarif import render_sarif
        return render_sarif(findings, tool_version=tool_version)
    if fmt == "github":
        from trainguard.report.github import render_github
        return render_github(findings)
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


def statistics(findings: Sequence[Finding]) -> str:
    """One line per code, most frequent first: ``   3  TG201  graph-kept-across-steps``."""
    counts: dict[tuple[str, str], int] = {}
    for f in findings:
        counts[(f.code, f.name)] = counts.get((f.code, f.name), 0) + f.count
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0][0]))
    return "\n".join(f"{n:4d}  {code}  {name}" for (code, name), n in rows)
