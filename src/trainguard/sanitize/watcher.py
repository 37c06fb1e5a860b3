"""The watcher: installs the hooks, feeds events to the checks, collects findings.

Use it through :func:`trainguard.watch` (a block of code) or ``trainguard run`` (a whole script).
"""

from __future__ import annotations

import linecache
import os
import re
import sys
import time
import traceback
from time import perf_counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, TextIO

from trainguard.config import Config, is_suppressed, load_config
from trainguard.findings import Finding
from trainguard.sanitize.bounds import Overrun, clock
from trainguard.sanitize.cadence import Cadence
from trainguard.sanitize.checks import EVENTS, Check, Diagnosis, discover
from trainguard.sanitize.frames import user_location
from trainguard.sanitize.ranks import RankLink, exit_guard
from trainguard.sanitize.state import State
from trainguard.sanitize import watchdog
from trainguard.sanitize.watchdog import EXIT_S, SLOW_S, Watchdog

__all__ = ["Watcher", "watch"]

_active: "Watcher | None" = None
# the file name a notebook's cell runs under (``trainguard/notebook.py``): ``nb.ipynb[cell 4]``
_CELL = re.compile(r"^(.*\.ipynb)\[cell (\d+)\]$")
# Events a check may listen to only while armed: the wrappers behind them are always installed.
_ON_DEMAND = frozenset({"on_root_forward", "on_backward", "on_backward_done", "on_step_pre",
                        "on_step"})


# Events a check may also receive on settled steps (``Check.always``).
_ALWAYS = frozenset({"on_root_forward", "on_backward", "on_step"})


class Watcher:
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
                 checks: list[type[Check]] | None = None, every_step: bool = False) -> None:
        self.config = config if config is not None else Config()
        self.stream = stream
        self.state = State()
        # Settled steps (see cadence.py) skip the checks; ``every_step`` checks every step.
        self.cadence = Cadence(enabled=not every_step, resume=self._resume,
                               settle=self._settle)
        self.reports = 0  # report() calls so far: a step with one never settles
        self.armed: set[Check] = set()  # checks following something across steps
        self.ranks = RankLink.from_env()  # None outside torchrun (WORLD_SIZE unset or 1)
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

    def listen(self, check: Check, events: tuple[str, ...], on: bool) -> None:
        """Subscribe ``check`` to ``events`` (``on``) or unsubscribe it. The lists are replaced,
        not changed in place, so an event being dispatched finishes with the list it started."""
        if check in self._off:
            return
        if on:
            self.armed.add(check)
        else:
            self.armed.discard(check)
        for event in events:
            rest = [(c, m) for c, m in self.handlers[event] if c is not check]
            if on:
                rest.append((check, getattr(check, event)))
            self.handlers[event] = rest

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> "Watcher":
        """Install the hooks. Raises RuntimeError when already started."""
        from trainguard.sanitize.hooks import install

        if self._started:
            raise RuntimeError("this Watcher is already started")
        self._undo = install(self)
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

    # ---- events ----------------------------------------------------------------------------
    def emit(self, event: str, *args: Any) -> None:
        """Call every check listening to ``event``, timed by the watchdog under one deadline; a
        check that raises becomes TG002, one that runs past the deadline is stopped (TG002)."""
        handlers = self.handlers[event]
        if handlers:
            self._emit(event, handlers, args)

    def _emit(self, event: str, handlers: list[tuple[Check, Any]], args: tuple) -> None:
        dog = self.watchdog
        start = perf_counter()
        outer = clock.start  # (an event sent while another runs keeps the outer one's deadline)
        if outer is None:
            clock.start = start
        try:
            if event in dog.slow:
                self._timed(event, handlers, args)
            else:  # (the usual case: the clock read twice for the whole event)
                for check, method in handlers:
                    try:
                        method(*args)
                    except Overrun:
                        self._overran(check, event, perf_counter())
                    except Exception as exc:  # a bug in a check must never break the user's run
                        self._check_failed(check, event, exc)
        finally:
            clock.start = outer
        took = perf_counter() - start
        dog.total += took
        if took > SLOW_S or dog.total > watchdog.FLOOR_S:  # (rare)
            self._judge(event, handlers, start, took)

    def _timed(self, event: str, handlers: list[tuple[Check, Any]], args: tuple) -> None:
        """The handlers of a slow event, each timed (``Check.spent_s``)."""
        start = now = perf_counter()
        for check, method in handlers:
            try:
                method(*args)
            except Overrun:
                self._overran(check, event, perf_counter())
            except Exception as exc:
                self._check_failed(check, event, exc)
            later = perf_counter()
            check.spent_s += later - now
            now = later
        if now - start <= SLOW_S:
            self.watchdog.slow.discard(event)

    def _judge(self, event: str, handlers: list[tuple[Check, Any]], start: float,
               took: float) -> None:
        """After an event slower than SLOW_S, or once the checks have FLOOR_S in all: its checks
        are timed one by one from its next occurrence, and a check past the deadline is
        stopped."""
        dog = self.watchdog
        now = start + took
        if took > SLOW_S:
            dog.slow.add(event)
        if dog.exit_start is None:
            if dog.overrun(now):
                self._past_deadline(event, handlers, now)
        elif start <= dog.exit_start + watchdog.EXIT_S < now:  # (it crossed the line)
            self._past_deadline(event, handlers, now)

    def _past_deadline(self, event: str, handlers: list, now: float) -> None:
        """The event ran past its deadline without a walk to stop it: the check that took the
        most time in slow events is stopped (a single handler: that one; none timed yet: the
        next time, when this event is timed handler by handler); at exit, the one whose event
        crossed the line (exit events go one check at a time)."""
        dog = self.watchdog
        if not dog.overrun(now):
            return
        live = [c for c, _ in handlers if c not in self._off]
        if dog.exit_start is not None or len(live) == 1:
            check = live[-1] if live else None
        else:
            check = max((c for c in self.checks if c not in self._off and c.spent_s),
                        key=lambda c: c.spent_s, default=None)
        if check is not None:
            self._overran(check, event, now)

    def call(self, check: Check, event: str, method: Any, args: tuple) -> Any:
        """``method(*args)`` for ``check`` alone, as :meth:`emit` calls it; returns what it
        returns (None when it raised or was stopped). Never raises (but KeyboardInterrupt)."""
        found: list[Any] = []
        self._emit(event, [(check, lambda *a: found.append(method(*a)))], args)
        return found[0] if found else None

    def emit_always(self, event: str, *args: Any) -> None:
        """``event`` on a settled step, for the checks whose ``always`` lists it."""
        for check, method in self.always[event]:
            try:
                method(*args)
            except Overrun:  # (no deadline on settled calls: never, in practice)
                self._overran(check, event, time.perf_counter())
            except Exception as exc:
                self._check_failed(check, event, exc)

    def _resume(self, boundary: bool) -> None:
        """The checks resume after settled calls they did not see (see cadence.py)."""
        self.emit("on_resume", boundary)

    def _settle(self) -> None:
        """The loop settled: the checks see no call until they get ``on_resume``."""
        self.emit("on_settle")

    def emit_module(self, event: str, call: Any) -> None:
        """``emit`` for per-module events: only checks whose ``module_types`` match the module."""
        module = call.module
        handlers = [(c, m) for c, m in self.handlers[event] if isinstance(module, c.module_types)]
        if handlers:
            self._emit(event, handlers, (call,))

    def _switch_off(self, check: Check) -> None:
        """No more events for ``check``; its hooks on the user's tensors come off."""
        self._off.add(check)
        self.armed.discard(check)
        for table in (self.handlers, self.always):
            for name, handlers in list(table.items()):
                table[name] = [(c, m) for c, m in handlers if c is not check]
        try:
            check.release()
        except Exception:  # a check already failing: what it cannot remove dies with the tensors
            pass

    def _overran(self, check: Check, event: str, now: float) -> None:
        """The watchdog stops ``check``: during the run TG002 at once, at exit one TG002 for all
        the checks stopped (:meth:`_report_exit_overrun`)."""
        dog = self.watchdog
        self._switch_off(check)
        if dog.exit_start is not None:
            self._stopped_at_exit.append((check, event, now - dog.exit_start))
            return
        wall, spent = dog.wall(now), check.spent_s
        self.report("TG002", f"check {check.code} took {spent:.1f} s of the run's first "
                    f"{wall:.1f} s ({100 * dog.total / max(wall, 1e-9):.0f}% for all checks, "
                    f"more than half) while handling {event}; it was switched off and the run "
                    "went on", fix=f"report this with the message above; {check.code} was not "
                    "checked after this point")

    def _report_exit_overrun(self) -> None:
        stopped, self._stopped_at_exit = self._stopped_at_exit, []
        if not stopped:
            return
        names = ", ".join(f"{c.code} (stopped at {t:.1f} s, in {e})" for c, e, t in stopped)
        self.report("TG002", f"trainguard's own work at exit ran past {EXIT_S:.0f} s: {names}; "
                    "what those checks would have found at exit is missing, the run itself is "
                    "unchanged", fix="report this with the message above",
                    where=self._last_location())

    def _last_location(self) -> tuple | None:
        """The last backward's line (a place in the script for exit-time notes), or None."""
        last = self.state.backwards[-1] if self.state.backwards else None
        return last.where if last is not None else None

    def _check_failed(self, check: Check, event: str, exc: Exception) -> None:
        self._switch_off(check)
        inside = _raised_at(exc)
        self.report("TG002", f"check {check.code} raised {type(exc).__name__}: {exc}{inside} "
                    f"while handling {event}; it was switched off and the run went on",
                    fix=f"report this with the message above; {check.code} was not checked after "
                        "this point")

    def hook_failed(self, hook: str, exc: Exception) -> None:
        """A wrapper's own bookkeeping raised: report TG002 (once per wrapper and line) and let the
        user's call go on unobserved. Never raises."""
        try:
            inside = _raised_at(exc)
            self.report("TG002", f"trainguard's wrapper of {hook} raised {type(exc).__name__}: "
                        f"{exc}{inside}; the call itself ran unobserved",
                        fix="report this with the message above; findings that depend on this "
                            "call may be missing")
        except Exception:  # reporting itself failed: stay out of the user's way
            pass

    # ---- findings --------------------------------------------------------------------------
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
            tag = f"[rank {self.ranks.rank}] " if self.ranks is not None else ""
            self._print(tag + finding.format())
        return finding

    def amend(self, finding: Finding, message: str, fix: str | None = None) -> None:
        """Add a second observation to ``finding`` (another pitfall of the same code found on the
        same line): its message and fix grow, its count does not; the amended finding is shown
        again."""
        finding.message = f"{finding.message}. Also: {message}"
        if fix and fix not in (finding.fix or ""):
            finding.fix = f"{finding.fix}; {fix}" if finding.fix else fix
        tag = f"[rank {self.ranks.rank}] " if self.ranks is not None else ""
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
            return (f"trainguard: no findings ({len(self.checks)} checks; "
                    f"{self.state.step} optimizer steps, {self.state.backward_count} backward "
                    f"calls watched{self._sampled()})")
        rows = [("count", "code", "name", "where")]
        rows += [(str(f.count), f.code, f.name,
                  f"{f.path}{'' if f.cell is None else f'[cell {f.cell}]'}:{f.line}")
                 for f in findings]
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        steps = self.state.step
        lines = [f"trainguard: {len(findings)} finding{'s' if len(findings) != 1 else ''} "
                 f"({steps} optimizer step{'s' if steps != 1 else ''} watched"
                 f"{self._sampled()})"]
        for r in rows:
            lines.append("  " + "  ".join([r[0].rjust(widths[0])]
                                         + [r[i].ljust(widths[i]) for i in (1, 2)] + [r[3]]))
        return "\n".join(lines)

    def _sampled(self) -> str:
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
        tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, target)


def _raised_at(exc: BaseException) -> str:
    """`` at file.py:LINE`` of the innermost frame ``exc`` was raised in ("" without a traceback)."""
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    return f" at {os.path.basename(frame.filename)}:{frame.lineno}" if frame else ""


def _display_path(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _innermost_user_location(exc: BaseException) -> tuple | None:
    from trainguard.sanitize.frames import is_user_file

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
            (``sanitize/cadence.py``).

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
