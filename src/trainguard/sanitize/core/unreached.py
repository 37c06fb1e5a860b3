"""Shared base of the checks that follow forward outputs until a backward reaches them (not a
check itself: discovery only takes classes defined in ``tg*.py``)."""

from __future__ import annotations

from typing import Any

from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.state import Unreached


class UnreachedOutputs(Check):
    """Follows outputs added to ``self.pending`` and calls :meth:`report_unreached` with the key
    of every group whose graphs died, or are still alive at exit, with no backward reaching them.
    Pending graphs are settled after each optimizer step, each backward and at exit; with nothing
    pending, steps and backwards do not call the check at all (:meth:`follow` arms it).
    ``reached``: the keys a backward reached at least once (up to 1024 kept)."""

    on_demand = ("on_step", "on_backward_done")

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.pending = Unreached(self.state)
        self.reached: set[Any] = set()  # keys a backward reached at least once

    def on_step(self, optimizer: Any) -> None:
        self._resolve()

    def on_backward_done(self, call: Any) -> None:
        self._resolve()

    def on_exit(self) -> None:
        self._resolve(final=True)

    def follow(self, tensor: Any, key: Any) -> None:
        """Follow ``tensor``'s graph under ``key`` until a backward reaches it or it dies."""
        self.pending.add(tensor, key)
        if self.pending:
            self.arm()

    def _resolve(self, final: bool = False) -> None:
        if not self.pending:
            return
        reached: list[Any] = []
        for key in self.pending.resolve(final=final, reached=reached):
            self.report_unreached(key)
        if len(self.reached) < 1024:
            self.reached.update(reached)
        if not self.pending:
            self.disarm()

    def report_unreached(self, key: Any) -> None:
        raise NotImplementedError
