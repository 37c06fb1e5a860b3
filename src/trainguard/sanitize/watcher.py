"""The watcher: installs the hooks, feeds events to the checks, collects findings.

Use it through :func:`trainguard.watch` (a block of code) or ``trainguard run`` (a whole script).
"""

from __future__ import annotations

import linecache
import os
import re
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, TextIO

from trainguard.config import Config, is_suppressed, load_config
from trainguard.findings import Finding
from trainguard.sanitize.checks import discover
from trainguard.sanitize.core.bounds import clock
from trainguard.sanitize.core.cadence import Cadence
from trainguard.sanitize.core.check import EVENTS, Check, Diagnosis
from trainguard.sanitize.core.frames import user_location
from trainguard.sanitize.core.state import State
from trainguard.sanitize.core.watchdog import EXIT_S, Watchdog
from trainguard.sanitize.dispatch import Dispatch
from trainguard.sanitize.probes import (backward, built, children, data, functional, grad_mode,
                                        imports, io, module_call, optim, registration, repro,
                                        warning_line)
from trainguard.sanitize.ranks.children import unwatched_note, unwatched_section
from trainguard.sanitize.ranks.link import RankLink, exit_guard

__all__ = ["Watcher", "watch"]

# Each probe wraps one PyTorch API family (``probes/``); attached in this order, undone in reverse.
PROBES = (module_call, optim, backward, grad_mode, registration, io, functional, data, built,
          warning_line, repro, imports, children)

_active: "Watcher | None" = None
# the file name a notebook's cell runs under (``trainguard/notebook.py``): ``nb.ipynb[cell 4]``
_CELL = re.compile(r"^(.*\.ipynb)\[cell (\d+)\]$")
# Events a check may listen to only while armed: the wrappers behind them are always installed.
_ON_DEMAND = frozenset({"on_root_forward", "on_backward", "on_backward_done", "on_step_pre",
                        "on_step"})


# Events a check may also receive on settled steps (``Check.always``).
_ALWAYS = frozenset({"on_root_forward", "on_loss", "on_backward", "on_step"})


class Watcher(Dispatch):
    """Runs the runtime checks while it is started.

    Args:
        config: which codes to report (``[tool.trainguard]`` plus ``--select``/``--ignore``).
        stream: where findings are printed as first seen, and the summary (default stderr).
        checks: the check classes to run (default: every check in ``sanitize/checks``).

    Attributes:
        findings: the findings so far, in the order first seen, each with its count.
        watchdog: the checks' own time (``watchdog.py``); ``watchdog.exit_s`` is what the exit
            work took (the exit analyses; with :func:`watch`, also the summary and the report).
    """

    def __init__(self, *, config: Config | None = None, stream: TextIO | None = None,
                 checks: list[type[Check]] | None = None, every_step: bool = False,
                 ranks: Any = None) -> None:
        self.config = config if config is not None else Config()
        self.stream = stream
        self.state = State()
        # Settled steps (see cadence.py) skip the checks; ``every_step`` checks every step.
        self.cadence = Cadence(enabled=not every_step, resume=self._resume,
                               settle=self._settle)
        self.reports = 0  # report() calls so far: a step with one never settles
        self.armed: set[Check] = set()  # checks following something across steps
        # None outside torchrun (WORLD_SIZE unset or 1); a child of a watched script: its link
        self.ranks = ranks if ranks is not None else RankLink.from_env()
        self.family: Any = None  # the children started through torch.multiprocessing
        if checks is None:
            checks = discover()
        self.checks = [cls(self) for cls in checks]
        self.handlers: dict[str, list[tuple[Check, Any]]] = {e: [] for e in EVENTS}
        self._off: set[Check] = set()  # checks switched off after raising
        for check in self.checks:
            self._subscribe(check)
        # the checks that need an event on settled steps too (``Check.always``), per event
        self.always: dict[str, list[tuple[Check, Any]]] = {
            e: [(c, getattr(c, e)) for c in self.checks if e in c.always] for e in _ALWAYS}
        self.module_types: tuple[type, ...] = tuple(
            {t: None for c in self.checks for t in c.module_types})
        self._by_key: dict[tuple[str, str, int], Finding] = {}
        self._silenced: set[tuple[str, str, int]] = set()
        self._undo: list[Any] = []
        self._started = False
        self.watchdog = Watchdog()
        self._stopped_at_exit: list[tuple[Check, str, float]] = []  # the watchdog's, at exit

    @property
    def findings(self) -> list[Finding]:
        return list(self._by_key.values())

    def _subscribe(self, check: Check) -> None:
        if set(check.always) - _ALWAYS:
            raise RuntimeError(f"{check.code}: always events must be among {sorted(_ALWAYS)}")
        bad = set(check.on_demand) - _ON_DEMAND
        if bad:
            raise RuntimeError(f"{check.code}: on_demand events must be among {sorted(_ON_DEMAND)}, "
                               f"not {sorted(bad)}")
        for event in EVENTS:
            method = getattr(type(check), event)
            if method is not getattr(Check, event) and event not in check.on_demand:
                self.handlers[event].append((check, getattr(check, event)))

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> "Watcher":
        """Install the hooks. Raises RuntimeError when already started."""
        if self._started:
            raise RuntimeError("this Watcher is already started")
        self._undo = []
        for probe in PROBES:
            self._undo += probe.attach(self)
        if self.ranks is not None:
            self._undo += self.ranks.attach()
        self._started = True
        self.watchdog = Watchdog()
        clock.dog = self.watchdog  # (the deadline's walks read)
        return self

    def stop(self) -> None:
        """Tell the checks the run ended, then remove every hook and wrapper."""
        if not self._started:
            return
        self.watchdog.begin_exit()
        try:
            for check, method in list(self.handlers["on_exit"]):  # one by one: each timed
                self._emit("on_exit", [(check, method)], ())
            self._report_exit_overrun()
            if self.family is not None:
                self.family.finish()  # the watched children's reports
            if self.ranks is not None:
                self.ranks.finish(self)  # send this rank's findings; rank 0 merges every rank's
        finally:
            self.watchdog.exit_s = time.perf_counter() - (self.watchdog.exit_start or 0.0)
            for undo in reversed(self._undo):
                undo()
            self._undo.clear()
            self.state.release_all()
            self.state.stack.clear()
            self.state.modules.clear()
            self.state.no_grad_depth = 0
            self.state.enable_grad_at.clear()
            self._started = False

    def detach(self) -> None:
        """Remove the hooks without the exit work (a ``fork`` child drops its parent's)."""
        global _active
        _active = None if _active is self else _active
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()
        self._started = False

    # ---- events ----------------------------------------------------------------------------

    def _resume(self, boundary: bool) -> None:
        """The checks resume after settled calls they did not see (see cadence.py)."""
        self.emit("on_resume", boundary)

    def _settle(self) -> None:
        """The loop settled: the checks see no call until they get ``on_resume``."""
        self.emit("on_settle")

    def _report_exit_overrun(self) -> None:
        stopped, self._stopped_at_exit = self._stopped_at_exit, []
        if not stopped:
            return
        names = ", ".join(f"{c.code} (stopped at {t:.1f} s, in {e})" for c, e, t in stopped)
        self.report("TG002", f"trainguard's own work at exit ran past {EXIT_S:.0f} s: {names}; "
                    "what those checks would have found at exit is missing, the run itself is "
                    "unchanged", fix="report this with the message above",
                    where=self.state.last_backward_where())

    def report(self, code: str, message: str, *, fix: str | None = None,
               where: tuple | None = None, extra: dict | None = None,
               quiet: bool = False) -> Finding | None:
        """Record a finding at ``where`` (default: the user's current line); merge repeats."""
        self.reports += 1
        if where is None:
            where = user_location(sys._getframe(1))
        path, line, col = (where + (1,))[:3] if where else ("<unknown>", 0, 1)
        key = (code, path, line)
        known = self._by_key.get(key)
        if known is not None:
            known.count += 1
            return known
        if key in self._silenced:
            return None
        shown = _display_path(path)
        cell = _CELL.match(shown)  # a notebook's cell run by `trainguard run nb.ipynb`
        if cell is not None:
            shown = cell.group(1)
        if (not self.config.wants(code, path) or self.config.excluded(path)
                or is_suppressed(code, linecache.getline(path, line))):
            self._silenced.add(key)
            return None
        finding = Finding.make(code, layer="run", path=shown, line=line, col=col,
                               message=message, fix=fix, extra=extra or {},
                               cell=int(cell.group(2)) if cell is not None else None)
        self._by_key[key] = finding
        if not quiet:
            tag = self.ranks.tag if self.ranks is not None else ""
            self._print(tag + finding.format())
        return finding

    def keep(self, finding: Finding) -> Finding:
        """Add a finding another rank reported (not printed); an earlier one at the same place
        wins."""
        return self._by_key.setdefault((finding.code, finding.path, finding.line), finding)

    def amend(self, finding: Finding, message: str, fix: str | None = None) -> None:
        """Add a second observation to ``finding`` (another pitfall of the same code found on the
        same line): its message and fix grow, its count does not; the amended finding is shown
        again."""
        finding.message = f"{finding.message}. Also: {message}"
        if fix and fix not in (finding.fix or ""):
            finding.fix = f"{finding.fix}; {fix}" if finding.fix else fix
        tag = self.ranks.tag if self.ranks is not None else ""
        self._print(tag + finding.format())

    def explain(self, exc: BaseException) -> list[Finding]:
        """Ask the checks to explain ``exc``; record their diagnoses as findings and add each to the
        exception as a note (PEP 678), so it is printed after the original traceback."""
        out: list[Finding] = []
        where_default = _innermost_user_location(exc)
        self.watchdog.begin_exit()
        for check, method in list(self.handlers["on_error"]):
            diagnosis: Diagnosis | None = self.call(check, "on_error", method, (exc,))
            if diagnosis is None:
                continue
            before = len(self._by_key)
            finding = self.report(check.code, diagnosis.message, fix=diagnosis.fix,
                                  where=diagnosis.where or where_default, quiet=True)
            if finding is not None and len(self._by_key) > before:
                out.append(finding)
                exc.add_note(f"\ntrainguard: {finding.format()}\n  why: {finding.why}\n"
                             f"  docs: {finding.docs}")
        return out

    def _print(self, text: str) -> None:
        stream = self.stream if self.stream is not None else sys.stderr
        print(text, file=stream, flush=True)

    def summary(self) -> str:
        """The table printed at exit: one row per finding, with its count."""
        if self.ranks is not None:
            return self.ranks.summary(self)
        findings = self.findings
        if not findings:
            return "\n".join([
                f"trainguard: no findings ({len(self.checks)} checks; {self.state.step} optimizer "
                f"steps, {self.state.backward_count} backward calls watched{self._sampled()})"]
                + (self.family.lines() if self.family is not None else []))
        family = self.family if self.family is not None and self.family.count else None
        rows = [("count", "code", "name") + (("process",) if family else ()) + ("where",)]
        rows += [(str(f.count), f.code, f.name) + ((family.where_seen(f),) if family else ())
                 + (f"{f.path}{'' if f.cell is None else f'[cell {f.cell}]'}:{f.line}",)
                 for f in findings]
        n = len(rows[0])
        widths = [max(len(r[i]) for r in rows) for i in range(n)]
        steps = self.state.step
        lines = [f"trainguard: {len(findings)} finding{'s' if len(findings) != 1 else ''} "
                 f"({steps} optimizer step{'s' if steps != 1 else ''} watched"
                 f"{self._sampled()})"]
        for r in rows:
            lines.append("  " + "  ".join([r[0].rjust(widths[0])]
                                         + [r[i].ljust(widths[i]) for i in range(1, n - 1)]
                                         + [r[-1]]))
        return "\n".join(lines + (family.lines() if family else []))

    def _sampled(self) -> str:
        return self._skipped() + unwatched_note(self.state.children)

    def _skipped(self) -> str:
        skipped = self.cadence.steps_skipped
        if not skipped:
            return ""
        # a loop without optimizer steps is bounded by its backward (or forward) calls
        unit = "step" if self.state.step else "iteration"
        return (f"; {skipped} settled {unit}{'s' if skipped != 1 else ''} repeated a checked one "
                "and were not checked in full (--every-step checks all)")

    def print_summary(self) -> None:
        self._print(self.summary())

    def write_json(self, path: str | os.PathLike[str]) -> None:
        """Write ``{"findings": [...]}`` to ``path`` (atomically); under torchrun rank 0 adds
        ``"ranks"``: world size, the ranks that reported, their step counts and the missing ones."""
        import json

        target = Path(path)
        tmp = target.with_name(target.name + ".tmp")
        data: dict = {"findings": [f.to_dict() for f in self.findings]}
        if self.ranks is not None:
            data["ranks"] = self.ranks.report_section()
        if self.state.children:
            data["unwatched_child_processes"] = unwatched_section(self.state.children)
        if self.family is not None and self.family.count:
            data["children"] = self.family.report_section()
        tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, target)


def _display_path(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _innermost_user_location(exc: BaseException) -> tuple | None:
    from trainguard.sanitize.core.frames import is_user_file

    tb = exc.__traceback__
    found = None
    while tb is not None:
        if is_user_file(tb.tb_frame.f_code.co_filename):
            found = (tb.tb_frame.f_code.co_filename, tb.tb_lineno, 1)
        tb = tb.tb_next
    return found


@contextmanager
def watch(*, select: str | list[str] | None = None, ignore: str | list[str] | None = None,
          report: str | os.PathLike[str] | None = None, summary: bool = True,
          stream: TextIO | None = None, every_step: bool = False) -> Iterator[Watcher]:
    """Run the runtime checks around a block of code.

    Findings are printed to ``stream`` (default stderr) as first seen and as a table when the block
    ends; a PyTorch error raised in the block that a check can explain gets a diagnosis printed,
    and is re-raised unchanged. Nested ``watch()`` blocks share the outer watcher.

    Args:
        select: code prefixes to report (``"TG2,TG301"`` or a list); default: the
            ``[tool.trainguard]`` table of the nearest ``pyproject.toml``, else every code.
        ignore: code prefixes not to report.
        report: write ``{"findings": [...]}`` as JSON to this file at exit.
        summary: print the summary table at exit.
        stream: text stream for findings (default ``sys.stderr``).
        every_step: check every optimizer step. By default, once the loop repeats the same calls
            from the same lines in the same modes with nothing to report, only one step in 16 is
            checked in full (one in 32 after 8 clean samples in a row) until a call differs
            (``sanitize/core/cadence.py``).

    Yields:
        the :class:`Watcher`; ``watcher.findings`` holds the findings.

    Raises:
        UsageError: ``select``/``ignore`` or ``pyproject.toml`` name unknown codes.

    Example::

        import trainguard
        with trainguard.watch() as w:
            train(model, loader)
        assert not w.findings
    """
    global _active
    if _active is not None:
        yield _active
        return
    config = load_config(Path.cwd())
    to_str = (lambda v: ",".join(v) if isinstance(v, list) else v)
    config = config.with_overrides(select=to_str(select), ignore=to_str(ignore))
    watcher = Watcher(config=config, stream=stream, every_step=every_step).start()
    _active = watcher
    try:
        yield watcher
    except BaseException as exc:
        if not isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)):
            watcher.explain(exc)
        raise
    finally:
        _active = None
        with exit_guard(watcher.ranks):  # under torchrun: a SIGTERM now waits for the report
            watcher.stop()
            if summary:
                watcher.print_summary()
            if report is not None and (watcher.ranks is None or watcher.ranks.rank == 0):
                watcher.write_json(report)  # under torchrun, rank 0 writes the merged report
            dog = watcher.watchdog
            dog.exit_s = time.perf_counter() - (dog.exit_start or time.perf_counter())
