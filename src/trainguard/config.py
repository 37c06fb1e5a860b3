"""Selection and suppression, the same in every layer.

- On the line: ``# trainguard: ignore[TG201]`` or ``# noqa: TG201`` (several codes comma-separated;
  a bare ``# trainguard: ignore`` silences every code on that line; a bare ``# noqa`` is left to
  other tools and does not silence trainguard).
- In ``pyproject.toml``::

      [tool.trainguard]
      select = ["TG"]            # prefixes allowed
      ignore = ["TG5"]
      exclude = ["build", "third_party/*.py"]
      per-file-ignores = { "tests/*" = ["TG206"] }

- On the command line: ``--select TG2,TG301 --ignore TG206``, which override the file's lists.
"""

from __future__ import annotations

import fnmatch
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from trainguard.catalog import CATALOG
from trainguard.errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI (a dependency there)
    import tomli as tomllib

__all__ = ["Config", "load_config", "suppressed_codes", "is_suppressed", "parse_code_list"]

_NOQA = re.compile(r"#\s*noqa\s*:\s*(?P<codes>[A-Z]+[0-9]*(?:\s*,\s*[A-Z]+[0-9]*)*)", re.I)
_IGNORE = re.compile(r"#\s*trainguard\s*:\s*ignore(?:\[(?P<codes>[^\]]*)\])?", re.I)

ALL = frozenset({"*"})


def parse_code_list(value: str | list[str] | None, *, where: str) -> list[str]:
    """Parse ``"TG2,TG301"`` or ``["TG2"]`` into upper-case prefixes, checking each one.

    Raises:
        UsageError: a prefix matches no code in the catalogue (names ``where`` it came from).
    """
    if value is None:
        return []
    if not isinstance(value, (str, list)):
        raise UsageError(f"{where}: expected a list of code prefixes such as [\"TG2\"], got "
                         f"{value!r}")
    items = value.split(",") if isinstance(value, str) else list(value)
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise UsageError(f"{where}: expected code prefixes such as 'TG2', got {item!r}")
        prefix = item.strip().upper()
        if not prefix:
            continue
        if not any(code.startswith(prefix) for code in CATALOG):
            raise UsageError(
                f"{where}: {item.strip()!r} matches no trainguard code "
                f"(codes look like TG201; prefixes such as TG2 are allowed)"
            )
        out.append(prefix)
    return out


def suppressed_codes(source_line: str) -> frozenset[str]:
    """Codes silenced by a comment on this source line; ``{"*"}`` means every code."""
    codes: set[str] = set()
    m = _IGNORE.search(source_line)
    if m:
        if m.group("codes") is None or not m.group("codes").strip():
            return ALL
        codes.update(c.strip().upper() for c in m.group("codes").split(",") if c.strip())
    m = _NOQA.search(source_line)
    if m:
        codes.update(c.strip().upper() for c in m.group("codes").split(","))
    return frozenset(codes)


def is_suppressed(code: str, source_line: str) -> bool:
    """True when ``source_line`` carries a suppression comment covering ``code``."""
    codes = suppressed_codes(source_line)
    return codes is ALL or any(code.startswith(c) for c in codes)


@dataclass
class Config:
    """What to report. Prefix lists; an empty ``select`` means every code."""

    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    root: Path | None = None

    def wants(self, code: str, path: str | None = None) -> bool:
        """Whether a finding of ``code`` at ``path`` should be reported."""
        if self.select and not any(code.startswith(p) for p in self.select):
            return False
        if any(code.startswith(p) for p in self.ignore):
            return False
        if path is not None:
            rel = self._relative(path)
            for pattern, prefixes in self.per_file_ignores.items():
                if _match(rel, pattern) and any(code.startswith(p) for p in prefixes):
                    return False
        return True

    def excluded(self, path: str | Path) -> bool:
        """Whether ``path`` matches an ``exclude`` pattern (by relative path or by any part)."""
        rel = self._relative(str(path))
        parts = Path(rel).parts
        return any(_match(rel, pat) or any(fnmatch.fnmatch(p, pat) for p in parts)
                   for pat in self.exclude)

    def _relative(self, path: str) -> str:
        p = Path(path)
        if self.root is not None and p.is_absolute():
            try:
                return p.relative_to(self.root).as_posix()
            except ValueError:
                return p.as_posix()
        return p.as_posix()

    def with_overrides(self, *, select: str | None = None, ignore: str | None = None) -> "Config":
        """A copy with ``--select``/``--ignore`` flags applied (flags replace the file's lists)."""
        return Config(
            select=parse_code_list(select, where="--select") if select is not None else self.select,
            ignore=parse_code_list(ignore, where="--ignore") if ignore is not None else self.ignore,
            exclude=list(self.exclude),
            per_file_ignores=dict(self.per_file_ignores),
            root=self.root,
        )


def _match(rel: str, pattern: str) -> bool:
    return fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(rel, pattern.rstrip("/") + "/*")


def find_pyproject(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` at or above ``start``."""
    start = start.resolve()
    for folder in [start, *start.parents] if start.is_dir() else start.parents:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_config(start: str | Path = ".") -> Config:
    """Read ``[tool.trainguard]`` from the nearest ``pyproject.toml`` at or above ``start``.

    Raises:
        UsageError: the file does not parse, or a key or code in it is unknown (names the file).
    """
    pyproject = find_pyproject(Path(start))
    if pyproject is None:
        return Config()
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{pyproject}: cannot read [tool.trainguard]: {exc}") from exc
    table = data.get("tool", {}).get("trainguard", {})
    known = {"select", "ignore", "exclude", "per-file-ignores"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise UsageError(
            f"{pyproject}: unknown key(s) in [tool.trainguard]: {', '.join(unknown)} "
            f"(known: {', '.join(sorted(known))})"
        )
    where = f"{pyproject} [tool.trainguard]"
    if not isinstance(table.get("per-file-ignores", {}), dict):
        raise UsageError(f"{where}: per-file-ignores must be a table of glob patterns to code "
                         f"lists, e.g. {{ \"tests/*\" = [\"TG206\"] }}, got "
                         f"{table['per-file-ignores']!r}")
    per_file = {
        pattern: parse_code_list(codes, where=f"{where} per-file-ignores[{pattern!r}]")
        for pattern, codes in table.get("per-file-ignores", {}).items()
    }
    exclude = table.get("exclude", [])
    if not isinstance(exclude, list) or not all(isinstance(e, str) for e in exclude):
        raise UsageError(f"{where}: exclude must be a list of glob patterns, got {exclude!r}")
    return Config(
        select=parse_code_list(table.get("select"), where=f"{where} select"),
        ignore=parse_code_list(table.get("ignore"), where=f"{where} ignore"),
        exclude=exclude,
        per_file_ignores=per_file,
        root=pyproject.parent,
    )
