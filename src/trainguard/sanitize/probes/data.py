"""The data probe: passes over a DataLoader and epochs of a DistributedSampler.

- ``DataLoader.__iter__`` becomes ``on_loader_iter`` (once per pass over a DataLoader, before any
  worker starts); facts kept (``State``): ``loader_id`` (the DataLoader iterated last, part of a
  model call's cadence key) and ``loader_passes`` (the latest passes with their iterators);
- ``DistributedSampler.__iter__`` becomes ``on_sampler_iter`` (an epoch's iteration starts);
  with it, ``DistributedSampler.set_epoch`` called from the user's own code is noted in
  ``State.epoch_set`` (the sampler's latest such call: its line and how many calls so far), so that
  a repeated epoch can be traced to the call that set it.

Nothing is emitted in another process than the one that installed the wrappers (forked DataLoader
workers inherit them).
"""

from __future__ import annotations

import os
import sys
import weakref
from typing import TYPE_CHECKING, Any

from trainguard.sanitize.core.frames import frame_location, is_user_code
from trainguard.sanitize.core.passes import LoaderPass
from trainguard.sanitize.probes.patch import Undo
from trainguard.sanitize.probes.patch import patch as _patch

if TYPE_CHECKING:
    from trainguard.sanitize.core.bus import Bus

__all__ = ["attach"]


def attach(bus: "Bus") -> list[Undo]:
    """Wrap ``DataLoader.__iter__``/``DistributedSampler.__iter__`` when a check listens; returns
    the undo actions."""
    undo: list[Undo] = []
    if bus.handlers["on_sampler_iter"]:
        _sampler_iter(bus, undo)
    if bus.handlers["on_loader_iter"]:
        _loader_iter(bus, undo)
    return undo


def _sampler_iter(bus: "Bus", undo: list[Undo]) -> None:
    from torch.utils.data.distributed import DistributedSampler

    def make_sampler_iter(original: Any) -> Any:
        def __iter__(self: Any) -> Any:
            bus.emit("on_sampler_iter", self)
            return original(self)
        return __iter__
    _patch(DistributedSampler, "__iter__", make_sampler_iter, undo)
    noted = bus.state.epoch_set

    def make_set_epoch(original: Any) -> Any:
        def set_epoch(self: Any, epoch: int) -> None:
            original(self, epoch)
            caller = sys._getframe(1)
            if is_user_code(caller.f_code):  # not a trainer library's own call
                try:
                    noted[self] = (frame_location(caller), noted.get(self, (None, 0))[1] + 1)
                except TypeError:  # a sampler subclass without weak references
                    pass
        return set_epoch
    _patch(DistributedSampler, "set_epoch", make_set_epoch, undo)


def _loader_iter(w: "Bus", undo: list[Undo]) -> None:
    """Wrap ``DataLoader.__iter__``: one ``on_loader_iter`` event per pass over a DataLoader, and
    the pass noted in ``State.loader_passes`` (a :class:`LoaderPass`: its iterator's
    ``_num_yielded`` counts the batches it has given, with no per-batch hook; the latest pass of a
    DataLoader ends before the event of its next one)."""
    import torch
    from torch.utils.data import DataLoader

    is_compiling = torch.compiler.is_compiling
    pid = os.getpid()

    passes = [0]
    # DataLoader -> (its passes so far, its latest pass)
    per_loader: "weakref.WeakKeyDictionary[Any, tuple[int, LoaderPass]]" = \
        weakref.WeakKeyDictionary()
    steps = lambda: w.state.step  # noqa: E731

    def make(original: Any) -> Any:
        def __iter__(self: Any) -> Any:
            watched = not is_compiling() and os.getpid() == pid
            count = 0
            if watched:
                w.state.loader_id = id(self)  # part of a model call's cadence key
                try:
                    count, latest = per_loader.get(self, (0, None))
                    if latest is not None:
                        latest.end()  # (before persistent workers reset a reused iterator)
                except Exception as exc:
                    w.hook_failed("DataLoader.__iter__", exc)
                w.emit("on_loader_iter", self)
            iterator = original(self)
            if watched:
                try:
                    passes[0] += 1
                    try:
                        length: int | None = len(self)
                    except TypeError:  # an IterableDataset without __len__
                        length = None
                    noted = LoaderPass(passes[0], self, length, count + 1, iterator, steps,
                                       w.state.pass_listeners)
                    per_loader[self] = (count + 1, noted)
                    w.state.loader_passes.append(noted)
                except Exception as exc:  # (an iterator without weak references or attributes)
                    w.hook_failed("DataLoader.__iter__", exc)
            return iterator
        return __iter__

    _patch(DataLoader, "__iter__", make, undo)
