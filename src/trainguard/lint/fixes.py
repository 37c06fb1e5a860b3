"""Applying automatic fixes: ``--fix`` (safe edits), ``--unsafe-fixes``, ``--diff``.

A safe fix cannot change what the script computes (``total += loss`` to ``total += loss.item()``
where ``total`` is only printed); an unsafe one may (``weights_only=True`` refuses a checkpoint
that pickles a whole module). Overlapping edits are skipped; the next run applies them.
"""

from __future__ import annotations

import difflib

from trainguard.lint.rules import Edit

__all__ = ["apply_edits", "unified_diff"]


def apply_edits(text: str, edits: list[Edit]) -> tuple[str, int]:
    """Apply non-overlapping edits; returns the new text and how many edits were applied."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(line: int, col: int) -> int:
        return starts[line - 1] + len(lines[line - 1].encode("utf-8")[:col].decode("utf-8",
                                                                                    "ignore"))

    spans = sorted({(offset(e.line, e.col), offset(e.end_line, e.end_col), e.text) for e in edits},
                   reverse=True)
    applied = 0
    last_start = len(text) + 1
    for start, end, new in spans:
        if end > last_start:
            continue
        text = text[:start] + new + text[end:]
        last_start = start
        applied += 1
    return text, applied


def unified_diff(path: str, before: str, after: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True),
                                        after.splitlines(keepends=True),
                                        fromfile=f"a/{path.lstrip('/')}",
                                        tofile=f"b/{path.lstrip('/')}"))
