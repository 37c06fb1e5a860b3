"""``Finding``: the one record that the linter, the sanitizer and every report share.

The JSON keys are the catalogue's finding shape: ``code``, ``name``, ``layer`` (``"lint"`` or
``"run"``), ``path``, ``line``, ``col`` (1-based, characters), optional ``end_line``/``end_col``,
``cell`` (notebooks), ``message``, ``why``, ``fix``, ``count``, ``ranks``, ``docs`` (the command
that prints the code's docs entry, ``trainguard rule TG201``) and, in JSON, ``helpUri`` (the
entry's published page, from ``[project.urls] Documentation``). The text form is
``path:line:col: TG201 graph-kept-across-steps: message (fix: ...)``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from trainguard.catalog import lookup

__all__ = ["Finding"]


@dataclass(slots=True)
class Finding:
    """One pitfall seen at one place.

    Build findings with :meth:`Finding.make`, which fills ``name``, ``why`` and ``docs`` from the
    catalogue so that every layer reports a code the same way.
    """

    code: str
    name: str
    layer: Literal["lint", "run"]
    path: str
    line: int
    col: int
    message: str
    why: str
    fix: str
    docs: str
    end_line: int | None = None
    end_col: int | None = None
    cell: int | None = None
    count: int = 1
    ranks: list[int] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def make(
        cls,
        code: str,
        *,
        layer: Literal["lint", "run"],
        path: str,
        line: int,
        col: int = 1,
        message: str,
        fix: str | None = None,
        why: str | None = None,
        **kwargs: Any,
    ) -> "Finding":
        """Create a finding for ``code``; ``fix`` and ``why`` default to the catalogue's.

        Raises:
            KeyError: ``code`` is not in the catalogue.
        """
        entry = lookup(code)
        return cls(
            code=entry.code,
            name=entry.name,
            layer=layer,
            path=path,
            line=line,
            col=col,
            message=message,
            why=why or entry.why,
            fix=fix or entry.fix,
            docs=entry.docs,
            **kwargs,
        )

    @property
    def location(self) -> tuple[str, int, int]:
        return (self.path, self.line, self.col)

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.line, self.col, self.code)

    def to_dict(self) -> dict[str, Any]:
        """The finding as JSON-ready data; optional keys that are unset are left out."""
        data = asdict(self)
        extra = data.pop("extra")
        for key in ("end_line", "end_col", "cell", "ranks"):
            if data[key] is None:
                del data[key]
        help_uri = lookup(self.code).help_uri
        if help_uri:
            data["helpUri"] = help_uri
        if extra:
            data["extra"] = extra
        return data

    def format(self) -> str:
        """``path:line:col: CODE name: message (fix: ...)``; notebooks add ``[cell N]``."""
        where = f"{self.path}:{self.line}:{self.col}"
        if self.cell is not None:
            where = f"{self.path}[cell {self.cell}]:{self.line}:{self.col}"
        times = f" [x{self.count}]" if self.count > 1 else ""
        ranks = f" [ranks {','.join(map(str, self.ranks))}]" if self.ranks else ""
        return f"{where}: {self.code} {self.name}: {self.message}{times}{ranks} (fix: {self.fix})"
