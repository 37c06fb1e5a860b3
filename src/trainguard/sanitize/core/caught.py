"""Errors a check explained where they were raised, kept until the run ends.

A check that explains one of PyTorch's errors (a device mismatch, a label dtype, a backward
without a graph, a saved tensor changed in place, a batch of one) reads what it needs when the
failing call raises, while the loaders, models and frames are alive. The run may die of that
error (the check's ``on_error`` then claims it and explains it there) or the script may catch it
(``try: ... except RuntimeError:`` around a step, which skips the batch or stops quietly): what
nobody claimed is reported by the check at exit.

Each held error is kept itself, not only its ``id()``: a freed exception's id may be given to a
later one, which would then claim the wrong entry.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Caught"]


class Caught:
    """At most ``limit`` errors, each with what the check read at the failure (``payload``)."""

    __slots__ = ("_held", "_limit")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._held: dict[int, tuple[BaseException, Any]] = {}  # id(error) -> (error, payload)

    @property
    def full(self) -> bool:
        """No room for another error (one already held can still be read and replaced)."""
        return len(self._held) >= self._limit

    def get(self, exc: BaseException) -> Any:
        """The payload held for ``exc``, or None."""
        held = self._held.get(id(exc))
        return held[1] if held is not None and held[0] is exc else None

    def hold(self, exc: BaseException, payload: Any) -> None:
        """Keep ``payload`` for ``exc`` (replacing what was held for it); nothing past the limit."""
        if id(exc) in self._held or not self.full:
            self._held[id(exc)] = (exc, payload)

    def claim(self, exc: BaseException) -> Any:
        """The run dies of ``exc``: its payload, no longer held (None when none was)."""
        held = self._held.pop(id(exc), None)
        return held[1] if held is not None and held[0] is exc else None

    def drain(self) -> list[Any]:
        """The payloads of the errors nobody claimed (the script caught them), in the order held;
        none held afterwards."""
        out = [payload for _, payload in self._held.values()]
        self._held.clear()
        return out
