"""TG601 sampler-epoch-not-set: a ``DistributedSampler`` reshuffles every epoch the same way.

What it watches: each time a ``DistributedSampler`` starts iterating (once per epoch), its
``shuffle`` flag and its ``epoch`` attribute.

When it fires: a shuffling sampler starts a second pass with the same ``epoch`` value as the pass
before: ``set_epoch(epoch)`` was not called between them, so its permutation, seeded by
``seed + epoch``, repeats and every epoch sees the same order. Reported once per sampler at the
cause: the line that built the sampler (the watcher notes where user code builds each
``DistributedSampler``), naming the line that started the pass; else at that line (the ``for``
over the DataLoader). Visible in a single process
too (``DistributedSampler(ds, num_replicas=1, rank=0)``).

Silent on: ``shuffle=False`` samplers (validation); samplers whose ``epoch`` changes between passes
(``set_epoch`` called, or trainguard's loop, which calls it); a sampler iterated once.

Cost: per ``DistributedSampler`` pass, two integers compared.

Reference: the ``DistributedSampler`` docs ("calling the set_epoch() method at the beginning of
each epoch before creating the DataLoader iterator is necessary to make shuffling work properly
across multiple epochs", https://pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler).
"""

from __future__ import annotations

import weakref
from typing import Any

from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.frames import short_location, user_location


class SamplerEpochNotSet(Check):
    code = "TG601"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.last_epoch: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self.reported: weakref.WeakSet[Any] = weakref.WeakSet()
        self.built: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()

    def on_built(self, obj: Any, where: Any) -> None:
        if hasattr(obj, "set_epoch") and where is not None:  # a DistributedSampler
            self.built[obj] = where

    def on_sampler_iter(self, sampler: Any) -> None:
        if not getattr(sampler, "shuffle", False) or sampler in self.reported:
            return
        epoch = getattr(sampler, "epoch", None)
        previous = self.last_epoch.get(sampler)
        self.last_epoch[sampler] = epoch
        if previous is not None and previous == epoch:
            self.reported.add(sampler)
            built = self.built.get(sampler)
            at = f" (this pass started at {short_location(user_location())})" if built else ""
            self.report(
                f"{'this' if built else 'a'} shuffling DistributedSampler started another pass "
                f"with epoch={epoch}{at}, the same as the pass before: set_epoch() was not "
                "called, so every epoch repeats the same order on every rank",
                fix="call sampler.set_epoch(epoch) at the start of every epoch, before iterating "
                    "the DataLoader",
                where=built)
