"""DataLoaders told apart by a serial number, each with a short description.

An ``id()`` is reused once a loader made per epoch is freed, so a check that groups model calls
by the DataLoader iterated last (TG101: the training and validation phases of one loop) numbers
each loader it sees, holding it weakly, and describes it once (``"batch_size=32, 384
samples"``).
"""

from __future__ import annotations

import weakref
from typing import Any

__all__ = ["LoaderSerials"]


class LoaderSerials:
    """The serial number of each DataLoader seen, and of the one iterated last (0: none)."""

    __slots__ = ("serials", "descriptions", "current")

    def __init__(self) -> None:
        self.serials: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self.descriptions: dict[int, str] = {}
        self.current = 0

    def note(self, loader: Any) -> None:
        """``loader``'s ``__iter__`` ran: it is the current one (numbered when first seen)."""
        serial = self.serials.get(loader)
        if serial is None:
            serial = self.serials[loader] = len(self.descriptions) + 1
            try:
                desc = f"batch_size={loader.batch_size}, {len(loader.dataset)} samples"
            except Exception:  # an iterable dataset has no length
                desc = f"batch_size={getattr(loader, 'batch_size', None)}"
            self.descriptions[serial] = desc
        self.current = serial

    def describe(self, serial: int) -> str:
        return self.descriptions.get(serial, "no DataLoader")
