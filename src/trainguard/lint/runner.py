"""Lint many inputs: files, folders, notebooks and standard input; apply or show fixes."""

from __future__ import annotations

import contextlib
import gc
import io
import sys
from collections.abc import Iterator
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from trainguard.config import Config
from trainguard.errors import UsageError
from trainguard.findings import Finding
from trainguard.lint.engine import lint_source
from trainguard.lint.files import iter_files
from trainguard.lint.fixes import apply_edits, unified_diff
from trainguard.lint.source import Source, read_notebook

__all__ = ["Outcome", "lint_paths", "read_source"]


@dataclass(slots=True)
class Outcome:
    findings: list[Finding] = field(default_factory=list)
    files: int = 0
    lines: int = 0
    fixed: int = 0
    diff: str = ""


def read_source(path: Path) -> Source:
    """Read a ``.py`` or ``.ipynb`` file.

    Raises:
        UsageError: the file cannot be read or is not a notebook.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if path.suffix == ".ipynb":
        return read_notebook(str(path), data.decode("utf-8", errors="replace"))
    return Source(path=str(path), text=decode_python(data))


def decode_python(data: bytes) -> str:
    """Decode source as Python does: a UTF-8 BOM or a ``# -*- coding: ... -*-`` line (PEP 263)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:  # an unknown coding name: let the parser report the file
        encoding = "utf-8"
    return data.decode(encoding, errors="replace")


def lint_paths(paths: list[str], *, config: Config, stdin_name: str = "-", fix: bool = False,
               diff: bool = False, unsafe: bool = False) -> Outcome:
    """Lint ``paths`` (``-`` is standard input).

    Raises:
        UsageError: a path does not exist (names it).
    """
    for p in paths:
        if p != "-" and not Path(p).exists():
            raise UsageError(f"{p}: no such file or folder")
    with _fewer_collections():
        return _lint_all(paths, config=config, stdin_name=stdin_name, fix=fix, diff=diff,
                         unsafe=unsafe)


@contextlib.contextmanager
def _fewer_collections() -> Iterator[None]:
    """Parsing allocates millions of small objects that live until their file is done; with
    the default thresholds the cyclic collector re-scans them so often that it took about 40%
    of a lint of a large tree (measured with ``gc.callbacks``). A larger first-generation
    threshold keeps memory bounded (every file's objects are freed when it is done) and halves
    that time; the caller's thresholds come back afterwards."""
    before = gc.get_threshold()
    gc.set_threshold(50_000, before[1], before[2])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _lint_all(paths: list[str], *, config: Config, stdin_name: str, fix: bool, diff: bool,
              unsafe: bool) -> Outcome:
    outcome = Outcome()
    for p in paths:
        if p == "-":
            text = sys.stdin.read()
            source = Source(path=stdin_name, text=text)
            _lint_one(source, None, config, outcome, fix=False, diff=diff, unsafe=unsafe)
            continue
        for file in iter_files([p], config):
            try:
                source = read_source(file)
            except UsageError as exc:
                outcome.findings.append(Finding.make(
                    "TG001", layer="lint", path=str(file), line=1, col=1, message=str(exc)))
                continue
            _lint_one(source, file, config, outcome, fix=fix, diff=diff, unsafe=unsafe)
    outcome.findings.sort(key=Finding.sort_key)
    return outcome


def _lint_one(source: Source, file: Path | None, config: Config, outcome: Outcome, *, fix: bool,
              diff: bool, unsafe: bool) -> None:
    result = lint_source(source, config=config)
    outcome.files += 1
    outcome.lines += source.text.count("\n") + 1
    chosen = [(f, edits) for f, edits, safe in result.fixes if safe or unsafe]
    if (fix or diff) and chosen and not source.cells:
        new_text, applied = apply_edits(source.text, [e for _, edits in chosen for e in edits])
        if diff:
            outcome.diff += unified_diff(source.path, source.text, new_text)
        elif file is not None and applied:
            file.write_text(new_text, encoding="utf-8")
            outcome.fixed += applied
            fixed_ids = {id(f) for f, _ in chosen}
            result.findings = [f for f in result.findings if id(f) not in fixed_ids] \
                if applied == sum(len(e) for _, e in chosen) else \
                lint_source(Source(path=source.path, text=new_text), config=config).findings
    outcome.findings.extend(result.findings)
