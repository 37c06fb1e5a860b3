"""The watchdog: the checks' own time, and when a check must stop.

The watcher times every event it sends a check (``Watcher.emit``: the checked steps, the exit, the
explanation of an error) and gives it a deadline (``bounds.deadline``) that the checks' walks read:

- during the run, the time at which the checks' share of the run's wall time (since the watcher
  started) would pass :data:`SHARE` (50%), once they have spent :data:`FLOOR_S` (2 s) in all, so
  that a short script whose first steps are all checked is not cut short;
- at exit (the exit analyses, the explanation of the error the script died of), :data:`EXIT_S`
  (2 s) for all of it together.

A deadline passed on the wall clock counts only if the CPU clock says the same (the checks' CPU
time past SHARE of the CPU time of the thread that runs them and the user's loop, or the exit work
past EXIT_S of the process's CPU time): on a machine whose cores are busy with other processes,
waiting for a core stretches a check's wall time but not its CPU time, and a check is never
stopped for the machine's load. During the run both sides are that thread's CPU time
(``time.thread_time``): torch's intra-op worker threads keep spinning for a while after a
parallel op and add to the process's CPU time whatever the check does, which would make a waiting
check look busy and a busy one look like half the run. A check that really takes the time spends
it on both clocks (a run waiting on I/O keeps the wall-clock rule).

The CPU clock is a system call (a few microseconds, and on a loaded machine a chance for the
scheduler to take the core away: milliseconds): it is read around each event only once the checks
have taken :data:`ARM` of :data:`FLOOR_S` on the wall clock, the first point at which it could
matter (a thread's CPU time never exceeds its wall time). Events before that are not counted in
``total_cpu``, which then lags the checks' CPU time by at most ``ARM * FLOOR_S``: a check is
stopped later, never sooner, and most runs never read it (checks of a few milliseconds per step).

A check past its deadline is stopped where it is (its walk raises ``bounds.Overrun``), or, if it
does not walk, once the event returns (the check that took the most time: an event slower than
:data:`SLOW_S` has its checks timed one by one from its next occurrence, ``Check.spent_s``; the
others cost one reading of the clock per event); it is switched off for the rest of the run and
named in one TG002 with its time. The user's run, its output and its exit code are unchanged. Events on
settled steps (``Check.always``) are not timed: each is constant work (one loss read, a look at
the parameters every 32 steps).
"""

from __future__ import annotations

import threading
import time

__all__ = ["Watchdog", "SHARE", "FLOOR_S", "EXIT_S", "SLOW_S", "ARM"]

SHARE = 0.5  # the checks may take at most this share of the run's wall time...
FLOOR_S = 2.0  # ... once they have taken this much in all (seconds)
EXIT_S = 2.0  # the exit analyses and the error's explanation together, at most (seconds)
SLOW_S = 0.001  # an event that took longer has its checks timed one by one the next time
ARM = 0.5  # the CPU clock is read per event once the checks have this share of FLOOR_S in all


class Watchdog:
    """The checks' time during the run, and when the exit work began.

    Each check's own time in slow events is ``check.spent_s`` (seconds).

    Attributes:
        started: ``perf_counter()`` when the watcher started.
        started_cpu: ``thread_time()`` (CPU seconds of the starting thread) when the watcher
            started; for events on another thread, that thread's CPU time at its first event.
        total: seconds all the checks have taken (events the watcher timed).
        total_cpu: CPU seconds the same events took on the thread that handled them, counted
            from the first event after ``total`` reached ``ARM * FLOOR_S``.
        exit_start: ``perf_counter()`` when the exit work began, or None before it.
        exit_start_cpu: ``process_time()`` when the exit work began.
        exit_s: seconds the exit work took (set by the watcher when it is over).
    """

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.started_cpu = time.thread_time()
        self.thread = threading.get_ident()
        self.other_threads: dict[int, float] = {}  # thread -> its thread_time() at first use
        self.total = 0.0
        self.total_cpu = 0.0
        self.exit_start: float | None = None
        self.exit_start_cpu = 0.0
        self.exit_s = 0.0
        self.slow: set[str] = set()  # events whose last occurrence took more than SLOW_S

    def begin_exit(self) -> None:
        """The exit work begins now (once: the error's explanation, then the exit analyses)."""
        if self.exit_start is None:
            self.exit_start = time.perf_counter()
            self.exit_start_cpu = time.process_time()

    def deadline(self, start: float) -> float:
        """The time an event that started at ``start`` must be over by: during the run, when the
        checks' share would pass SHARE (once they have FLOOR_S in all), solving
        ``total + (t - start) > SHARE * (t - started)`` for ``t``; at exit, EXIT_S after it began."""
        if self.exit_start is not None:
            return self.exit_start + EXIT_S
        by_share = (start - self.total - SHARE * self.started) / (1.0 - SHARE)
        return max(start + FLOOR_S - self.total, by_share)

    def overrun(self, now: float) -> bool:
        """Whether the checks are past their share of the run (or the exit work past its time),
        on the wall clock and on the CPU clock both (the events timed so far)."""
        if self.exit_start is not None:
            return now > self.exit_start + EXIT_S and self.cpu_past(None)
        return _past_share(self.total, now - self.started) and self.cpu_past(None)

    def cpu_past(self, event_start_cpu: float | None) -> bool:
        """Whether the CPU clock agrees that the checks are past their share (during the run) or
        the exit work past EXIT_S, counting the event running since ``event_start_cpu``
        (``thread_time()`` of this thread; None: only the events already added to
        ``total_cpu``)."""
        if self.exit_start is not None:
            return time.process_time() - self.exit_start_cpu > EXIT_S
        now = time.thread_time()
        ident = threading.get_ident()
        base = self.started_cpu if ident == self.thread else \
            self.other_threads.setdefault(ident, now)
        running = now - event_start_cpu if event_start_cpu is not None else 0.0
        return _past_share(self.total_cpu + running, now - base)

    def wall(self, now: float) -> float:
        """Seconds since the watcher started."""
        return now - self.started


def _past_share(spent: float, elapsed: float) -> bool:
    """Whether checks that took ``spent`` seconds of a run's ``elapsed`` (on one clock) are past
    their share: over FLOOR_S in all and over SHARE of the run."""
    return spent > FLOOR_S and spent > SHARE * elapsed
