"""What both trainer callbacks share: a ``trainguard.watch()`` opened at the start of a fit and
closed at its end, the findings as metrics for the trainer's loggers, and ``strict``."""

from __future__ import annotations

import os
from contextlib import ExitStack
from typing import Any, TextIO

from trainguard.errors import TrainguardError
from trainguard.findings import Finding

__all__ = ["FindingsError", "Session", "as_metrics", "as_markdown"]


class FindingsError(TrainguardError, RuntimeError):
    """Raised at the end of a fit watched with ``strict=True`` that reported findings.

    Attributes:
        findings: the findings, in the order first seen.
    """

    def __init__(self, findings: list[Finding]) -> None:
        self.findings = findings
        where = ", ".join(f"{f.code} at {_where(f)}" for f in findings[:5])
        more = f" and {len(findings) - 5} more" if len(findings) > 5 else ""
        super().__init__(f"trainguard: {len(findings)} finding{'s' if len(findings) != 1 else ''} "
                         f"in a fit watched with strict=True: {where}{more}; fix them or pass "
                         "strict=False (the summary above lists each with its fix)")


class Session:
    """One watched fit: :meth:`start` opens :func:`trainguard.watch`, :meth:`finish` closes it.

    A fit started while a watcher is already running (``trainguard run``, an outer ``watch()``
    block) shares that watcher: its findings are reported once, by the outer one, at its end.
    """

    def __init__(self, *, select: str | list[str] | None, ignore: str | list[str] | None,
                 report: str | os.PathLike[str] | None, every_step: bool,
                 stream: TextIO | None) -> None:
        self._options = dict(select=select, ignore=ignore, report=report, every_step=every_step,
                             stream=stream)
        # The sanitizer and its checks are imported when the callback is built (about 0.1 s of
        # CPU, once per process), so that the fit it watches pays only for the checks.
        from trainguard.sanitize.checks import discover
        from trainguard.sanitize.watcher import watch

        discover()
        self._watch = watch
        self._stack: ExitStack | None = None
        self.watcher: Any = None

    @property
    def active(self) -> bool:
        return self._stack is not None

    def start(self) -> None:
        """Start watching (a no-op while this session already watches)."""
        if self._stack is not None:
            return
        stack = ExitStack()
        self.watcher = stack.enter_context(self._watch(**self._options))
        self._stack = stack

    def finish(self, exc: BaseException | None = None) -> list[Finding]:
        """Stop watching and print the summary; with ``exc``, the error that ended the fit, whose
        diagnosis (if a check can explain it) is added to it as a note. Returns the findings."""
        stack, self._stack = self._stack, None
        if stack is None:
            return self.watcher.findings if self.watcher is not None else []
        if exc is None:
            stack.close()
        else:  # (the watch() block sees the error, as if it had been raised inside it)
            stack.__exit__(type(exc), exc, exc.__traceback__)
        return self.watcher.findings


def as_metrics(findings: list[Finding]) -> dict[str, float]:
    """``{"trainguard/findings": 2.0, "trainguard/TG201": 1.0, ...}``: the number of findings and
    the times each code was seen, for a logger's ``log_metrics`` or a Trainer's ``log``."""
    metrics = {"trainguard/findings": float(len(findings))}
    for f in findings:
        key = f"trainguard/{f.code}"
        metrics[key] = metrics.get(key, 0.0) + f.count
    return metrics


def as_markdown(findings: list[Finding]) -> str:
    """The findings as a Markdown table (for a TensorBoard text panel)."""
    if not findings:
        return "trainguard: no findings"
    rows = ["| count | code | name | where | message | fix |", "|---|---|---|---|---|---|"]
    for f in findings:
        cells = [str(f.count), f.code, f.name, _where(f), f.message, f.fix]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows)


def _where(f: Finding) -> str:
    cell = f"[cell {f.cell}]" if f.cell is not None else ""
    return f"{f.path}{cell}:{f.line}"
