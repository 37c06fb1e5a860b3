"""GitHub Actions workflow commands: ``::error file=...,line=...,col=...,title=...::message``.

See https://docs.github.com/actions/using-workflows/workflow-commands-for-github-actions.
"""

from __future__ import annotations

from collections.abc import Sequence

from trainguard.findings import Finding


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_prop(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(findings: Sequence[Finding]) -> str:
    lines = []
    for f in findings:
        props = [f"file={_escape_prop(f.path)}", f"line={f.line}", f"col={f.col}"]
        if f.end_line is not None:
            props.append(f"endLine={f.end_line}")
        if f.end_col is not None and f.end_line == f.line:
            props.append(f"endColumn={f.end_col}")
        props.append(f"title={_escape_prop(f'{f.code} {f.name}')}")
        where = f" (cell {f.cell})" if f.cell is not None else ""
        lines.append(f"::error {','.join(props)}::"
                     f"{_escape_data(f'{f.message}{where} (fix: {f.fix})')}")
    return "\n".join(lines)
