"""Reading what to lint: Python files, notebooks and standard input.

A notebook's code cells are joined into one script so that names flow between cells; IPython
magics (``%time``, ``%%bash`` cells) and shell lines (``!pip install``) become blank lines, so
they are skipped rather than reported as syntax errors, and every line maps back to its cell.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from trainguard.errors import UsageError

__all__ = ["Source", "read_notebook", "cell_line", "timed_statement"]

_MAGIC = re.compile(r"^\s*[%!?]|^\s*\w+\s*=\s*[!%]")
# A line magic that IPython gives a Python statement to run once, in the notebook's namespace
# (``%time loss = fit(10)``, ``%prun train()``); with options (``%prun -s cumtime ...``) it is not
# read.
_ONCE_LINE_MAGIC = re.compile(r"^(\s*)%(?:time|prun)\s+(?!-)(\S.*)$")
# Cell magics whose body is still Python.
_PY_CELL_MAGICS = {"time", "timeit", "capture", "prun", "debug"}


@dataclass(slots=True)
class Source:
    """Text to lint. ``cells[i]`` is (first line in ``text``, cell number) for notebooks."""

    path: str
    text: str
    cells: list[tuple[int, int]] = field(default_factory=list)

    def locate(self, line: int) -> tuple[int | None, int]:
        """(cell number or None, line within that cell) for a line of ``text``."""
        return cell_line(self.cells, line)


def cell_line(cells: list[tuple[int, int]], line: int) -> tuple[int | None, int]:
    """(cell number or None, line within that cell) for a line of a notebook's joined code;
    ``cells`` is :attr:`Source.cells` (empty for a Python file: the line itself)."""
    if not cells:
        return None, line
    cell, start = None, 1
    for first, number in cells:
        if first > line:
            break
        cell, start = number, first
    return cell, line - start + 1


def read_notebook(path: str, raw: str) -> Source:
    """Join a notebook's code cells (cells numbered from 1 as they appear in the notebook).

    Raises:
        UsageError: the file is not notebook JSON (names the file).
    """
    try:
        nb = json.loads(raw)
        cells = nb["cells"]
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path}: not a Jupyter notebook ({exc}); lint .py files as Python") \
            from exc
    lines: list[str] = []
    starts: list[tuple[int, int]] = []
    for number, cell in enumerate(cells, start=1):
        if cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        text = "".join(src) if isinstance(src, list) else str(src)
        cell_lines = text.splitlines()
        starts.append((len(lines) + 1, number))
        lines.extend(_strip_magics(cell_lines))
    return Source(path=path, text="\n".join(lines) + "\n", cells=starts)


def timed_statement(line: str) -> str | None:
    """The Python statement a ``%time``/``%prun`` line magic runs, at the line's indentation
    (``%time l = fit(10)`` -> ``l = fit(10)``); None for any other line."""
    m = _ONCE_LINE_MAGIC.match(line)
    return m.group(1) + m.group(2) if m else None


def _strip_magics(cell_lines: list[str]) -> list[str]:
    if cell_lines and cell_lines[0].startswith("%%"):
        magic = cell_lines[0][2:].split()[0] if cell_lines[0][2:].split() else ""
        if magic not in _PY_CELL_MAGICS:
            return [""] * len(cell_lines)
        cell_lines = [""] + cell_lines[1:]
    out = []
    continued = False
    for line in cell_lines:
        timed = None if continued else timed_statement(line)
        if timed is not None:
            out.append(timed)
            continued = line.rstrip().endswith("\\")
        elif continued or _MAGIC.search(line):
            # an indented magic may be the only statement of a block (`if x:\n  %pip ...`)
            indent = line[:len(line) - len(line.lstrip())]
            out.append(f"{indent}pass" if indent and not continued else "")
            continued = line.rstrip().endswith("\\")
        else:
            out.append(line)
    return out
