"""Where a notebook cell's line is in the .ipynb file itself, for reports that address the file.

A finding in a notebook says ``cell 4, line 2, column 9``: cells numbered from 1 as they appear
in the notebook (markdown cells count), lines within the cell's source. SARIF regions address the
artifact, the .ipynb file, so :class:`NotebookLines` finds where that character is stored in the
file's JSON text: Jupyter writes each source line as one string on its own line, so the region
lands on the very line a viewer of the file shows. A JSON string is read with its escapes
(``\\"``, ``\\n``, ``\\uXXXX``) so that the column is that of the character in the file.

The notebook is parsed with the standard library's own JSON scanner; only the position of each
string value is recorded on the way.
"""

from __future__ import annotations

import json
import json.decoder
import json.scanner
from pathlib import Path
from typing import Any

__all__ = ["NotebookLines"]


class _Mismatch(Exception):
    """The parsed strings and the document's values did not pair up (duplicate keys)."""


class NotebookLines:
    """The file positions of a notebook's cell sources.

    Example::

        lines = NotebookLines.read("nb.ipynb")
        lines.position(cell=4, line=2, col=9)   # (line, column) in nb.ipynb, 1-based, or None
    """

    def __init__(self, text: str, cells: dict[int, list[tuple[int, str]]]) -> None:
        self._text = text
        self._cells = cells  # cell number -> [(file offset of the string's first char, value)]

    @classmethod
    def read(cls, path: str | Path) -> NotebookLines | None:
        """Parse ``path``; None when it cannot be read or is not a notebook's JSON."""
        try:
            text = Path(path).read_text(encoding="utf-8")
            return cls(text, _cell_sources(text))
        except (OSError, UnicodeDecodeError, ValueError, _Mismatch, KeyError, TypeError):
            return None

    def position(self, *, cell: int, line: int, col: int) -> tuple[int, int] | None:
        """The 1-based (line, column) in the file of ``col`` on ``line`` of ``cell``, in
        characters (Unicode code points); None when the cell has no such place."""
        segments = self._cells.get(cell)
        if not segments or line < 1 or col < 1:
            return None
        source = "".join(value for _, value in segments)
        lines = source.splitlines(keepends=True)  # as the linter splits a cell
        if line > len(lines):
            return None
        target = sum(len(text) for text in lines[:line - 1]) + col - 1
        start = 0
        for index, (offset, value) in enumerate(segments):
            if target < start + len(value) or index == len(segments) - 1:
                raw = _raw_offset(self._text, offset, min(target - start, len(value)))
                break
            start += len(value)
        file_line = self._text.count("\n", 0, raw) + 1
        file_col = raw - (self._text.rfind("\n", 0, raw) + 1) + 1
        return file_line, file_col


def _cell_sources(text: str) -> dict[int, list[tuple[int, str]]]:
    strings: list[tuple[int, str]] = []  # every string value in document order, with its offset

    def parse_string(s: str, end: int, strict: bool) -> tuple[str, int]:
        value, stop = json.decoder.scanstring(s, end, strict)
        strings.append((end, value))
        return value, stop

    decoder = json.JSONDecoder()
    decoder.parse_string = parse_string  # type: ignore[attr-defined]
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # the scanner that calls it
    start = len(text) - len(text.lstrip())
    document, _ = decoder.raw_decode(text, start)

    cursor = iter(strings)

    def take(value: str) -> tuple[int, str]:
        entry = next(cursor, None)
        if entry is None or entry[1] != value:
            raise _Mismatch
        return entry

    def walk(node: Any) -> None:
        if isinstance(node, str):
            take(node)
        elif isinstance(node, dict):
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    cells: dict[int, list[tuple[int, str]]] = {}
    for key, value in document.items():
        if key != "cells":
            walk(value)
            continue
        for number, cell in enumerate(value, start=1):
            for cell_key, cell_value in cell.items():
                if cell_key != "source":
                    walk(cell_value)
                elif isinstance(cell_value, str):
                    cells[number] = [take(cell_value)]
                else:
                    cells[number] = [take(part) for part in cell_value]
    if next(cursor, None) is not None:
        raise _Mismatch
    return cells


def _raw_offset(text: str, start: int, chars: int) -> int:
    """The offset in ``text`` of the ``chars``-th decoded character of the JSON string whose
    first character is at ``start``."""
    j = start
    for _ in range(chars):
        if text[j] != "\\":
            j += 1
        elif text[j + 1] != "u":
            j += 2
        else:
            code = int(text[j + 2:j + 6], 16)
            j += 6
            if 0xD800 <= code < 0xDC00 and text.startswith("\\u", j):  # a surrogate pair: one
                j += 6                                                  # character
    return j
