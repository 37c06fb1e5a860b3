"""One pass over a DataLoader, as the data probe notes it (``State.loader_passes``).

A pass is the iterator one ``DataLoader.__iter__`` call returned. Its ``_num_yielded`` counts the
batches it has given, so a check reads a pass's progress without a hook per batch. A pass ends
when its iterator is released (a ``for`` loop finishing or breaking out) or when the next pass of
the same DataLoader starts (persistent workers reuse one iterator); either way the batches it
gave and the optimizer steps completed by then are kept, and the listeners in
``State.pass_listeners`` are called with the pass (from a weakref callback: they only note what
they need and report at a later event). The cost is one callback per pass.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable

__all__ = ["LoaderPass"]


class LoaderPass:
    """One pass over a DataLoader.

    Attributes:
        number: the pass's number among all passes of the run, from 1.
        loader_id: ``id()`` of its DataLoader.
        length: ``len(loader)`` in batches, or None (an ``IterableDataset`` without ``__len__``).
        epoch: the pass's number among its DataLoader's passes, from 1 (per-epoch iteration makes
            it the epoch).
        step_at_start: optimizer steps completed (all optimizers) when the pass started.
        step_at_end: optimizer steps completed when it ended (None while it runs).
    """

    __slots__ = ("number", "loader_id", "length", "epoch", "step_at_start", "step_at_end",
                 "_ref", "_vars", "_given", "_steps", "_listeners", "source", "__weakref__")

    def __init__(self, number: int, loader: Any, length: int | None, epoch: int, iterator: Any,
                 steps: Callable[[], int],
                 listeners: "list[Callable[[LoaderPass], None]]") -> None:
        self.number, self.loader_id, self.length, self.epoch = number, id(loader), length, epoch
        self.source = _source(loader)  # (read only on a finding's rare path)
        self._steps, self._listeners = steps, listeners
        self.step_at_start, self.step_at_end = steps(), None
        self._given = 0
        # the iterator's attributes, read once when it is released (they outlive it until then;
        # the iterator itself is held weakly); an iterator without them (a generator returned by
        # a DataLoader subclass) counts no batches
        self._vars: dict | None = getattr(iterator, "__dict__", None)
        if self._vars is None:
            self._vars = {}
        self._ref = weakref.ref(iterator, self._released)

    @property
    def again(self) -> bool:
        """Whether its DataLoader had a pass before (it is iterated per epoch)."""
        return self.epoch > 1

    @property
    def ended(self) -> bool:
        return self._vars is None

    @property
    def given(self) -> int:
        """Batches the pass has given (all of them, once it has ended)."""
        if self._vars is not None:
            return int(self._vars.get("_num_yielded", 0))
        return self._given

    def iterator(self) -> Any:
        """The pass's iterator, or None once released."""
        return self._ref()

    def end(self) -> None:
        """Close the pass (its DataLoader starts another): keep the batches given so far."""
        if self._vars is not None:
            self._given = int(self._vars.get("_num_yielded", 0))
            self._vars = None
            self.step_at_end = self._steps()
            for listener in self._listeners:
                listener(self)

    def _released(self, _ref: Any) -> None:
        try:
            self.end()
        except Exception:  # (a weakref callback must not raise into the user's code)
            self._vars = None


def _source(loader: Any) -> Any:
    """A weak reference to ``loader``'s dataset, or None when its collate function is the user's
    own (it may reorder a sample's elements) or the dataset cannot be referenced weakly."""
    collate = getattr(loader, "collate_fn", None)
    if collate is not None and getattr(collate, "__module__", "").split(".")[0] != "torch":
        return None
    try:
        return weakref.ref(loader.dataset)
    except TypeError:
        return None
