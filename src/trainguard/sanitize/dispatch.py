"""Sending events to the checks: the bus's dispatch, timed by the watchdog.

A check that raises is switched off and reported as TG002 (``check_failed``); one whose event runs
past the watchdog's deadline is stopped (``overran``, ``core/watchdog.py``); a probe whose own
bookkeeping raises reports TG002 and lets the user's call go on (``hook_failed``). The lists in
``handlers`` are replaced, never changed in place, so an event being dispatched finishes with the
list it started with.
"""

from __future__ import annotations

import os
import time
import traceback
from time import perf_counter, thread_time
from typing import Any

from trainguard.sanitize.core import watchdog
from trainguard.sanitize.core.bounds import Overrun, clock
from trainguard.sanitize.core.bus import Bus
from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.own_ops import active as modes_active
from trainguard.sanitize.core.own_ops import hidden as hidden_from_modes
from trainguard.sanitize.core.watchdog import SLOW_S

__all__ = ["Dispatch"]


class Dispatch(Bus):
    """The event half of :class:`~trainguard.sanitize.watcher.Watcher` (which sets up the
    attributes read here: ``handlers``, ``always``, ``armed``, ``checks``, ``watchdog``,
    ``_off``)."""

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

    def emit(self, event: str, *args: Any) -> None:
        """Call every check listening to ``event``, timed by the watchdog under one deadline; a
        check that raises becomes TG002, one that runs past the deadline is stopped (TG002)."""
        handlers = self.handlers[event]
        if handlers:
            self._emit(event, handlers, args)

    def _emit(self, event: str, handlers: list[tuple[Check, Any]], args: tuple) -> None:
        if modes_active():  # (the user's op counter must not count the checks' reads)
            with hidden_from_modes():
                self._emit_now(event, handlers, args)
        else:
            self._emit_now(event, handlers, args)

    def _emit_now(self, event: str, handlers: list[tuple[Check, Any]], args: tuple) -> None:
        dog = self.watchdog
        start = perf_counter()
        # the handling thread's own CPU (not torch's spinning workers), read only once the
        # checks' wall time nears the floor (watchdog.ARM): before that, the CPU clock (a system
        # call, some microseconds, and a chance for a loaded machine to take the core away) could
        # not agree that a check is past its share
        start_cpu = thread_time() if dog.total >= watchdog.FLOOR_S * watchdog.ARM else None
        outer, outer_cpu = clock.start, clock.start_cpu  # (an inner event keeps the outer deadline)
        if outer is None:
            clock.start, clock.start_cpu = start, start_cpu
        try:
            if event in dog.slow:
                self._timed(event, handlers, args)
            else:  # (the usual case: the clock read twice for the whole event)
                for check, method in handlers:
                    try:
                        method(*args)
                    except Overrun:
                        self.overran(check, event, perf_counter())
                    except Exception as exc:  # a bug in a check must never break the user's run
                        self.check_failed(check, event, exc)
        finally:
            late_cpu = clock.start_cpu  # (read by a walk past its wall deadline, if not before)
            clock.start, clock.start_cpu = outer, outer_cpu
        took = perf_counter() - start
        dog.total += took
        if start_cpu is None and outer is None:
            start_cpu = late_cpu
        if start_cpu is not None:
            dog.total_cpu += thread_time() - start_cpu
        # (rare) slow, or the checks may be past their share: _judge's own test of the wall
        # clock, inlined, as a long run has FLOOR_S in all after its first few thousand events
        if took > SLOW_S or dog.total > watchdog.FLOOR_S and (
                dog.exit_start is not None
                or dog.total > watchdog.SHARE * (start + took - dog.started)):
            self._judge(event, handlers, start, took)

    emit_to = _emit  # (Bus.emit_to: a probe that read the handlers itself)

    def _timed(self, event: str, handlers: list[tuple[Check, Any]], args: tuple) -> None:
        """The handlers of a slow event, each timed (``Check.spent_s``)."""
        start = now = perf_counter()
        for check, method in handlers:
            try:
                method(*args)
            except Overrun:
                self.overran(check, event, perf_counter())
            except Exception as exc:
                self.check_failed(check, event, exc)
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
            # (overrun's own wall-clock test first, inlined: most slow events are far from it)
            if dog.total > watchdog.FLOOR_S and dog.total > watchdog.SHARE * (now - dog.started) \
                    and dog.overrun(now):
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
            self.overran(check, event, now)

    def call(self, check: Check, event: str, method: Any, args: tuple) -> Any:
        """``method(*args)`` for ``check`` alone, as :meth:`emit` calls it; returns what it
        returns (None when it raised or was stopped). Never raises (but KeyboardInterrupt)."""
        found: list[Any] = []
        self._emit(event, [(check, lambda *a: found.append(method(*a)))], args)
        return found[0] if found else None

    def emit_settled(self, event: str, *args: Any) -> None:
        """``event`` on a settled step, for the checks whose ``always`` lists it."""
        for check, method in self.always[event]:
            try:
                method(*args)
            except Overrun:  # (no deadline on settled calls: never, in practice)
                self.overran(check, event, time.perf_counter())
            except Exception as exc:
                self.check_failed(check, event, exc)

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

    def overran(self, check: Check, event: str, now: float) -> None:
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

    def check_failed(self, check: Check, event: str, exc: Exception) -> None:
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


def _raised_at(exc: BaseException) -> str:
    """`` at file.py:LINE`` of the innermost frame ``exc`` was raised in ("" without a traceback)."""
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    return f" at {os.path.basename(frame.filename)}:{frame.lineno}" if frame else ""
