"""The lint rules, one module per code, found automatically.

A rule module defines ``CODE`` (a catalogue code) and ``check(script)``, which yields ``Hit``s;
optionally ``SKIP_IN_TESTS = True`` for rules about a training run (test files are not runs). Adding a
rule is adding a file here, its fixtures under ``tests/lint/fixtures/<CODE>/`` and its docs entry
``docs/rules/<CODE>.md``.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from dataclasses import dataclass, field
from types import ModuleType

__all__ = ["Hit", "Edit", "all_rules"]


@dataclass(frozen=True, slots=True)
class Edit:
    """Replace the source between two 1-based (line, col) positions (col 0-based, as ``ast``)."""

    line: int
    col: int
    end_line: int
    end_col: int
    text: str


@dataclass(slots=True)
class Hit:
    """What a rule saw: where (``node``), what (``message``) and what to do (``fix``, defaults to
    the catalogue's). ``edits`` is an automatic fix; ``safe`` says whether it cannot change what
    the script computes (``--fix``) or may (``--unsafe-fixes``)."""

    node: ast.AST
    message: str
    fix: str | None = None
    edits: list[Edit] = field(default_factory=list)
    safe: bool = False

_RULES: dict[str, ModuleType] | None = None


def all_rules() -> dict[str, ModuleType]:
    """code -> rule module, for every module in this package that defines ``CODE``."""
    global _RULES
    if _RULES is None:
        found = {}
        for info in pkgutil.iter_modules(__path__):
            module = importlib.import_module(f"{__name__}.{info.name}")
            code = getattr(module, "CODE", None)
            if code is not None:
                found[code] = module
        _RULES = dict(sorted(found.items()))
    return _RULES
