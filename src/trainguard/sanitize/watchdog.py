"""The watchdog: the checks' own time, and when a check must stop.

The watcher times every event it sends a check (``Watcher.emit``: the checked steps, the exit, the
explanation of an error) and gives it a deadline (``bounds.deadline``) that the checks' walks read:

- during the run, the time at which the checks' share of the run's wall time (since the watcher
  started) would pass :data:`SHARE` (50%), once they have spent :data:`FLOOR_S` (2 s) in all, so
  that a short script whose first steps are all checked is not cut short;
- at exit (the exit analyses, the explanation of the error the script died of), :data:`EXIT_S`
  (2 s) for all of it together.

A check past its deadline is stopped where it is (its walk raises ``bounds.Overrun``), or, if it
does not walk, as soon as the event returns; it is switched off for the rest of the run and named
in one TG002 with its time. The user's run, its output and its exit code are unchanged. Events on
settled steps (``Check.always``) are not timed: each is constant work (one loss read, a look at
the parameters every 32 steps).
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["Watchdog", "SHARE", "FLOOR_S", "EXIT_S"]

SHARE = 0.5  # the checks may take at most this share of the run's wall time...
FLOOR_S = 2.0  # ... once they have taken this much in all (seconds)
EXIT_S = 2.0  # the exit analyses and the error's explanation together, at most (seconds)


class Watchdog:
    """The time each check has taken, and the deadline of the event running now.

    Attributes:
        started: ``perf_counter()`` when the watcher started.
        spent: seconds taken per check (by the check object), events during the run.
        total: the sum of ``spent``.
        exit_start: ``perf_counter()`` when the exit work began, or None before it.
        exit_s: seconds the exit work took (set by the watcher when it is over).
    """

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.spent: dict[Any, float] = {}
        self.total = 0.0
        self.exit_start: float | None = None
        self.exit_s = 0.0

    def begin_exit(self) -> None:
        """The exit work begins now (once: the error's explanation, then the exit analyses)."""
        if self.exit_start is None:
            self.exit_start = time.perf_counter()

    def deadline(self, now: float) -> float:
        """The time an event starting at ``now`` must be over by."""
        if self.exit_start is not None:
            return self.exit_start + EXIT_S
        # (total + t - now) > SHARE * (t - started) and > FLOOR_S: solved for t
        share = (now - self.total - SHARE * self.started) / (1.0 - SHARE)
        return max(now + FLOOR_S - self.total, share)

    def charge(self, check: Any, seconds: float) -> None:
        """Add ``seconds`` to ``check``'s time (during the run)."""
        if self.exit_start is None:
            self.spent[check] = self.spent.get(check, 0.0) + seconds
            self.total += seconds

    def overrun(self, now: float) -> bool:
        """Whether the checks are past their share of the run (or the exit work past its time)."""
        if self.exit_start is not None:
            return now > self.exit_start + EXIT_S
        return self.total > FLOOR_S and self.total > SHARE * (now - self.started)

    def heaviest(self) -> Any:
        """The check that has taken the most time during the run (None before any)."""
        return max(self.spent, key=self.spent.__getitem__) if self.spent else None

    def wall(self, now: float) -> float:
        """Seconds since the watcher started."""
        return now - self.started
