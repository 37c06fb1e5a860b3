"""trainguard in Jupyter: ``%load_ext trainguard`` and ``trainguard run notebook.ipynb``.

In a notebook (IPython 8 or later)::

    %load_ext trainguard

    %%trainguard
    for epoch in range(3):          # this cell runs under the sanitizer; its findings are shown
        train_one_epoch(model, ...)  # as a table under the cell, with the cell and line of each

    %trainguard lint                 # lint the cells run so far (In[1], In[2], ...)

``%%trainguard`` takes the options of ``trainguard run``: ``--select CODES``, ``--ignore CODES``,
``--every-step``, ``--strict`` (raise :class:`~trainguard.integrations.FindingsError` after the
table when there are findings). Lines in earlier cells (a model class defined in cell 3) are
reported with their own cell number.

From a shell, ``trainguard run notebook.ipynb`` runs the notebook's code cells in order, as one
script (one ``__main__`` namespace), under the sanitizer, and reports ``notebook.ipynb[cell 6]:3``:
cells numbered from 1 as they appear in the notebook (markdown cells count, as in
``trainguard lint``), lines within the cell. IPython syntax that plain Python cannot run is
skipped and said on stderr: line magics and shell lines (``%matplotlib inline``, ``!pip install``)
become blank lines, except the statement of a ``%time`` or ``%prun`` line magic without options
(``%time losses = fit(10)``), which runs as Python, once, as IPython runs it; the body of a
cell under ``%%time``, ``%%capture`` or ``%%prun`` runs as Python (IPython runs it once, in the
notebook's namespace), and a cell that starts with another cell magic (``%%bash``,
``%%timeit``) is not run.
"""

from __future__ import annotations

import io
import json
import linecache
import re
import shlex
import sys
from pathlib import Path
from types import CodeType
from typing import Any

from trainguard.errors import UsageError

__all__ = ["load_ipython_extension", "notebook_cells", "compile_cells", "FindingsTable"]


# ---- trainguard run notebook.ipynb -------------------------------------------------------------
def notebook_cells(path: str) -> list[tuple[int, str]]:
    """The code cells of the notebook at ``path``: ``(cell number, source)``, numbered from 1 among
    all cells as they appear.

    Raises:
        UsageError: the file is not a notebook's JSON (names the file and what is wrong).
    """
    try:
        nb = json.loads(Path(path).read_text(encoding="utf-8"))
        cells = nb["cells"]
        if not isinstance(cells, list):
            raise TypeError("'cells' is not a list")
        out = []
        for number, cell in enumerate(cells, start=1):
            if cell.get("cell_type") != "code":
                continue
            source = cell.get("source", "")
            out.append((number, "".join(source) if isinstance(source, list) else str(source)))
        return out
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(f"{path}: not a readable Jupyter notebook ({type(exc).__name__}: "
                         f"{exc}); save it from Jupyter, or export it with `jupyter nbconvert "
                         "--to script`") from None


# cell magics whose body IPython runs once, as Python, in the notebook's namespace (timing it,
# capturing its output, profiling it): run as the body alone, the cell does the same work
_ONCE_MAGICS = frozenset({"time", "capture", "prun"})


def _plain_python(number: int, source: str, path: str) -> str | None:
    """``source`` with IPython-only lines blanked (line numbers kept); None for a cell magic."""
    lines = source.splitlines()
    if lines and lines[0].lstrip().startswith("%%"):
        magic = lines[0].lstrip()[2:].split()
        if magic and magic[0] in _ONCE_MAGICS:
            print(f"trainguard run: {Path(path).name}[cell {number}]: its body under the cell "
                  f"magic {lines[0].strip()!r} runs as plain Python", file=sys.stderr)
        elif not magic or magic[0] != "trainguard":
            print(f"trainguard run: {Path(path).name}[cell {number}] starts with the cell magic "
                  f"{lines[0].strip()!r} and was not run", file=sys.stderr)
            return None
        lines[0] = ""  # (%%trainguard: the whole notebook is watched already)
    from trainguard.lint.source import timed_statement

    out = []
    for i, line in enumerate(lines, start=1):
        stripped = line.lstrip()
        timed = timed_statement(line)
        if timed is not None:  # (%time/%prun run their statement once, as IPython does)
            print(f"trainguard run: {Path(path).name}[cell {number}]:{i}: the statement under "
                  f"{stripped.split()[0]!r} runs as plain Python", file=sys.stderr)
            line = timed
        elif stripped.startswith(("%", "!")) or re.match(r"^\w+\s*=\s*[!%]", stripped):
            print(f"trainguard run: {Path(path).name}[cell {number}]:{i}: IPython syntax "
                  f"{stripped!r} skipped", file=sys.stderr)
            indent = line[:len(line) - len(stripped)]
            line = f"{indent}pass" if indent else ""  # (it may be the only line of a block)
        out.append(line)
    return "\n".join(out) + "\n"


def cell_filename(path: str, number: int) -> str:
    """The file name a cell's code runs under: ``/abs/nb.ipynb[cell 4]`` (the watcher reports it as
    path ``nb.ipynb``, cell 4)."""
    return f"{path}[cell {number}]"


def compile_cells(path: str) -> list[CodeType]:
    """The code objects of the notebook's code cells, in order, each under
    :func:`cell_filename` with its source in ``linecache`` (tracebacks and checks read it).

    Raises:
        UsageError: the notebook cannot be read, or a cell does not parse (names the cell and
            line).
    """
    codes = []
    for number, source in notebook_cells(path):
        text = _plain_python(number, source, path)
        if text is None:
            continue
        name = cell_filename(path, number)
        linecache.cache[name] = (len(text), None, text.splitlines(keepends=True), name)
        try:
            codes.append(compile(text, name, "exec", dont_inherit=True))
        except SyntaxError as exc:
            raise UsageError(f"{Path(path).name}[cell {number}]:{exc.lineno}: cannot parse: "
                             f"{exc.msg}") from None
    return codes


# ---- %load_ext trainguard ----------------------------------------------------------------------
class FindingsTable:
    """Findings shown under a notebook cell: HTML in Jupyter, text elsewhere.

    Args:
        findings: the findings (``Finding``), in the order first seen.
        cells: a finding's ``path`` -> the cell number it is in (IPython's names of cells).
        steps: optimizer steps watched, for the heading.
    """

    def __init__(self, findings: list[Any], cells: dict[str, int], steps: int | None) -> None:
        self.findings = findings
        self.rows = [(f.count, f.code, f.name, _cell_of(f, cells), f.line, f.message, f.fix)
                     for f in findings]
        self.steps = steps  # None: lint findings

    def _heading(self) -> str:
        n = len(self.findings)
        what = ("trainguard lint" if self.steps is None else "trainguard")
        watched = ("the cells run so far" if self.steps is None else
                   f"{self.steps} optimizer step{'s' if self.steps != 1 else ''} watched")
        return f"{what}: {n or 'no'} finding{'s' if n != 1 else ''} ({watched})"

    def __repr__(self) -> str:
        lines = [self._heading()]
        for count, code, name, cell, line, message, fix in self.rows:
            lines.append(f"  {cell}, line {line}: {code} {name} [x{count}]: {message} "
                         f"(fix: {fix})")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        from html import escape

        if not self.rows:
            return f"<p>{escape(self._heading())}</p>"
        head = "".join(f"<th>{h}</th>" for h in ("count", "code", "name", "cell", "line",
                                                 "message", "fix"))
        body = "".join("<tr>" + "".join(f"<td>{escape(str(v))}</td>" for v in row) + "</tr>"
                       for row in self.rows)
        return (f"<p>{escape(self._heading())}</p><table><thead><tr>{head}</tr></thead>"
                f"<tbody>{body}</tbody></table>")


def _cell_of(finding: Any, cells: dict[str, int]) -> str:
    """``"cell 4"`` for a line in IPython's cell 4, else the file's name."""
    number = finding.cell if finding.cell is not None else cells.get(finding.path)
    if number is None:
        found = re.match(r"^<ipython-input-(\d+)-", finding.path)
        number = int(found.group(1)) if found else None
    return f"cell {number}" if number is not None else finding.path


def _cell_names(shell: Any) -> dict[str, int]:
    """IPython's file name of each cell's code -> its execution count (``In[n]``), as shown in
    findings (relative paths where the watcher shortens them)."""
    import os

    names: dict[str, int] = {}
    for name, number in getattr(shell.compile, "_filename_map", {}).items():
        names[name] = number
        try:
            names[os.path.relpath(name)] = number
        except ValueError:
            pass
    return names


def _current_cell(shell: Any, frame: Any) -> int:
    """The number of the cell being run: that of the innermost calling frame whose code is a
    cell's (IPython's ``execution_count`` is already the next cell's while a cell runs, from
    IPython 9 on)."""
    names = getattr(shell.compile, "_filename_map", {})
    while frame is not None:
        number = names.get(frame.f_code.co_filename)
        if number is not None:
            return number
        frame = frame.f_back
    return shell.execution_count


def _parse(line: str) -> Any:
    import argparse

    parser = argparse.ArgumentParser(prog="%%trainguard", add_help=False, exit_on_error=False,
                                     allow_abbrev=False)
    parser.add_argument("--select")
    parser.add_argument("--ignore")
    parser.add_argument("--every-step", action="store_true")
    parser.add_argument("--strict", action="store_true")
    try:
        return parser.parse_args(shlex.split(line))
    except (argparse.ArgumentError, SystemExit, ValueError) as exc:
        raise UsageError(f"%%trainguard {line.strip()}: {exc}; options: --select CODES, "
                         "--ignore CODES, --every-step, --strict") from None


def _magics_class() -> type:
    from IPython.core.magic import Magics, line_cell_magic, magics_class
    from IPython.display import display

    @magics_class
    class TrainguardMagics(Magics):
        @line_cell_magic
        def trainguard(self, line: str, cell: str | None = None) -> Any:
            """``%%trainguard [--select CODES] [--ignore CODES] [--every-step] [--strict]``: run
            the cell under the sanitizer and show its findings under it. ``%trainguard lint``:
            lint the cells run so far."""
            if cell is None:
                if line.split()[:1] != ["lint"]:
                    raise UsageError(f"%trainguard {line.strip()}: the line magic is "
                                     "`%trainguard lint`; watch a cell with `%%trainguard`")
                return self._lint()
            return self._watch(_parse(line), cell)

        def _watch(self, options: Any, cell: str) -> None:
            from trainguard.sanitize.watcher import watch

            shell = self.shell
            number = _current_cell(shell, sys._getframe(1))
            # (a blank first line for the %%trainguard line: line numbers are the cell's own)
            transformed = "\n" + shell.transform_cell(cell)
            name = shell.compile.cache(transformed, number, raw_code="\n" + cell)
            code = shell.compile(transformed, name, "exec")
            watcher = None
            try:
                with watch(select=options.select, ignore=options.ignore, summary=False,
                           every_step=options.every_step, stream=io.StringIO()) as watcher:
                    exec(code, shell.user_global_ns, shell.user_ns)
            finally:  # (after the watcher stopped: findings decided at the end are in the table)
                if watcher is not None:
                    display(FindingsTable(watcher.findings, _cell_names(shell),
                                          watcher.state.step))
            if options.strict and watcher.findings:
                from trainguard.integrations import FindingsError

                raise FindingsError(watcher.findings)

        def _lint(self) -> None:
            from trainguard.lint.engine import lint_source
            from trainguard.lint.source import read_notebook

            # cell n's source as typed is input_hist_raw[n]; this line's own cell is the last one
            history = self.shell.history_manager.input_hist_raw[1:-1]
            # (%%trainguard cells are Python: their first line goes, as for %%time)
            cells = [{"cell_type": "code", "source": re.sub(r"^\s*%%trainguard[^\n]*", "", src)}
                     for src in history]
            source = read_notebook("<notebook>", json.dumps({"cells": cells}))
            display(FindingsTable(lint_source(source).findings, {}, None))

    return TrainguardMagics


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext trainguard``: register ``%%trainguard`` and ``%trainguard lint``."""
    ipython.register_magics(_magics_class())
