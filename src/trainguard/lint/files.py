"""Which files to lint: paths given, folders walked, ``.gitignore`` and the usual folders skipped.

``.gitignore`` files are read at the top of every walked folder and below it, with the git rules
that matter in practice: ``#`` comments, ``!`` negation, a leading or inner ``/`` anchoring the
pattern to that folder, a trailing ``/`` for folders only, ``*``, ``?`` and ``**``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from trainguard.config import Config

__all__ = ["iter_files", "SKIP_DIRS", "LINTABLE"]

SKIP_DIRS = frozenset({".git", ".hg", ".svn", ".venv", "venv", ".env", "build", "dist",
                       "__pycache__", "node_modules", "site-packages", ".tox", ".nox",
                       ".mypy_cache", ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints",
                       ".eggs"})
LINTABLE = (".py", ".pyi", ".ipynb")


class _Ignore:
    """The patterns of one ``.gitignore``, relative to its folder."""

    def __init__(self, folder: Path, text: str) -> None:
        self.folder = folder
        self.rules: list[tuple[re.Pattern[str], bool, bool]] = []  # regex, negated, dir_only
        for raw in text.splitlines():
            line = raw.rstrip()
            if not line or line.startswith("#"):
                continue
            negated = line.startswith("!")
            if negated:
                line = line[1:]
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            anchored = "/" in line  # a leading or inner slash anchors to this folder
            self.rules.append((_glob_regex(line.lstrip("/"), anchored), negated, dir_only))

    def verdict(self, path: Path, is_dir: bool) -> bool | None:
        """True ignored, False re-included by a ``!`` rule, None not mentioned."""
        try:
            rel = path.relative_to(self.folder).as_posix()
        except ValueError:
            return None
        result = None
        for regex, negated, dir_only in self.rules:
            if dir_only and not is_dir:
                continue
            if regex.fullmatch(rel):
                result = not negated
        return result


def _glob_regex(pattern: str, anchored: bool) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        out.append("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c))
        i += 1
    body = "".join(out)
    return re.compile(body if anchored else f"(?:.*/)?{body}")


def _ignored(path: Path, is_dir: bool, stack: list[_Ignore]) -> bool:
    result = False
    for ignore in stack:
        verdict = ignore.verdict(path, is_dir)
        if verdict is not None:
            result = verdict
    return result


def _parent_ignores(folder: Path) -> list[_Ignore]:
    """The ``.gitignore`` files above ``folder`` up to the repository root (a ``.git`` folder)."""
    found = []
    for above in folder.resolve().parents:
        gi = above / ".gitignore"
        if gi.is_file():
            found.append(_Ignore(above, gi.read_text(encoding="utf-8", errors="replace")))
        if (above / ".git").exists():
            break
    return list(reversed(found))


def iter_files(paths: list[str], config: Config) -> Iterator[Path]:
    """Every lintable file under ``paths``; a file named explicitly is always linted."""
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            yield path
            continue
        if not path.is_dir():
            continue
        stack = _parent_ignores(path)
        yield from _walk(path.resolve(), path, stack, config)


def _walk(real: Path, shown: Path, stack: list[_Ignore], config: Config) -> Iterator[Path]:
    gi = real / ".gitignore"
    if gi.is_file():
        stack = stack + [_Ignore(real, gi.read_text(encoding="utf-8", errors="replace"))]
    try:
        entries = sorted(os.scandir(real), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        is_dir = entry.is_dir()
        if is_dir and (entry.name in SKIP_DIRS or entry.name.endswith(".egg-info")):
            continue
        full = real / entry.name
        if _ignored(full, is_dir, stack) or config.excluded(full):
            continue
        if is_dir:
            yield from _walk(full, shown / entry.name, stack, config)
        elif entry.name.endswith(LINTABLE):
            yield shown / entry.name
