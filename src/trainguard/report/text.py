"""Text: one ``path:line:col: CODE name: message (fix: ...)`` line per finding."""

from __future__ import annotations

from collections.abc import Sequence

from trainguard.findings import Finding


def render_text(findings: Sequence[Finding]) -> str:
    return "\n".join(f.format() for f in findings)
