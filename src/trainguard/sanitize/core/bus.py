"""The bus: the one surface that checks, probes and the rank merge see of the watcher.

Probes turn PyTorch calls into events (:meth:`Bus.emit`); checks receive them and report findings
(:meth:`Bus.report`, :meth:`Bus.amend`); a check that follows something across steps subscribes
to more events while it does (:meth:`Bus.listen`); the rank merge adds other ranks' findings
(:meth:`Bus.keep`). Nothing in a probe, a check or ``ranks/`` reads the watcher's private fields:
:class:`~trainguard.sanitize.watcher.Watcher` implements this class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainguard.findings import Finding
    from trainguard.sanitize.core.cadence import Cadence
    from trainguard.sanitize.core.state import State

__all__ = ["Bus"]


class Bus:
    """What the watcher offers its probes, checks and the rank merge.

    Attributes:
        state: the counters every probe keeps exact (``core/state.py``).
        cadence: which calls the checks see (``core/cadence.py``); probes key their calls with
            ``cadence.see(key)``.
        checks: the checks running, one instance each.
        handlers: event name -> ``[(check, bound method)]`` subscribed now. The lists are replaced,
            never changed in place, so a probe may keep the dict and read a list per call.
        always: event name -> the handlers that also run on settled steps
            (``on_root_forward``, ``on_loss``, ``on_backward``, ``on_step``).
        module_types: the module types some check wants ``on_forward_pre``/``on_forward`` for.
        armed: the checks following something across steps now (a step with one never settles).
        reports: :meth:`report` calls so far (a step with one never settles).
        ranks: the link to the other ranks under torchrun (``ranks/link.py``), or None.
        findings: the findings so far, in the order first seen.
    """

    state: "State"
    cadence: "Cadence"
    checks: list[Any]
    handlers: dict[str, list[tuple[Any, Any]]]
    always: dict[str, list[tuple[Any, Any]]]
    module_types: tuple[type, ...]
    armed: set[Any]
    reports: int
    ranks: Any

    @property
    def findings(self) -> list["Finding"]:
        raise NotImplementedError

    def emit(self, event: str, *args: Any) -> None:
        """Call every check subscribed to ``event``; never raises (a failing check is TG002)."""
        raise NotImplementedError

    def emit_to(self, event: str, handlers: list[tuple[Any, Any]], args: tuple) -> None:
        """:meth:`emit` with the subscribed handlers a probe read itself (``handlers[event]``,
        not empty) and the arguments as a tuple: one call less on a checked step's events."""
        raise NotImplementedError

    def emit_module(self, event: str, call: Any) -> None:
        """:meth:`emit` for a module call: only checks whose ``module_types`` match it."""
        raise NotImplementedError

    def emit_settled(self, event: str, *args: Any) -> None:
        """``event`` on a settled step, to the handlers in :attr:`always` only."""
        raise NotImplementedError

    def report(self, code: str, message: str, *, fix: str | None = None,
               where: tuple | None = None, extra: dict | None = None,
               quiet: bool = False) -> "Finding | None":
        """Record a finding (merged with an earlier one at the same place); None when it is
        suppressed or not selected."""
        raise NotImplementedError

    def amend(self, finding: "Finding", message: str, fix: str | None = None) -> None:
        """Add a second observation to ``finding`` (same code, same line)."""
        raise NotImplementedError

    def keep(self, finding: "Finding") -> "Finding":
        """Add a finding another rank reported (not printed); returns the one kept at that place
        (an earlier finding at the same code, path and line wins)."""
        raise NotImplementedError

    def listen(self, check: Any, events: tuple[str, ...], on: bool) -> None:
        """Subscribe ``check`` to ``events`` (``on``) or unsubscribe it; ``on`` also marks it
        armed."""
        raise NotImplementedError

    def check_failed(self, check: Any, event: str, exc: Exception) -> None:
        """``check`` raised ``exc`` while handling ``event``: TG002, and the check is switched
        off."""
        raise NotImplementedError

    def overran(self, check: Any, event: str, now: float) -> None:
        """The watchdog stops ``check`` (its walk ran past the deadline): TG002."""
        raise NotImplementedError

    def hook_failed(self, hook: str, exc: Exception) -> None:
        """A probe's own bookkeeping raised: TG002, and the user's call goes on unobserved."""
        raise NotImplementedError
