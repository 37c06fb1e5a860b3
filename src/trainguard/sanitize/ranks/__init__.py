"""The sanitizer across ranks: the link to rank 0 (``link.py``), merging every rank's findings
(``merge.py``). Both see the watcher only through the bus (``core/bus.py``)."""

from trainguard.sanitize.ranks.link import DEFAULT_TIMEOUT_S, TIMEOUT_ENV, RankLink, exit_guard

__all__ = ["RankLink", "exit_guard", "TIMEOUT_ENV", "DEFAULT_TIMEOUT_S"]
