"""TG601 sampler-epoch-not-set: a ``DistributedSampler`` reshuffles every epoch the same way.

What it watches: each time a ``DistributedSampler`` starts iterating (once per epoch), its
``shuffle`` flag and its ``epoch`` attribute.

When it fires: a shuffling sampler starts a second pass with the same ``epoch`` value as the pass
before: ``set_epoch(epoch)`` was not called between them, so its permutation, seeded by ``seed +
epoch``, repeats and every epoch sees the same order. Reported once per sampler where the missing
call belongs: in the loop that repeats the passes (from the user's frame that started the pass
outwards, the innermost ``for``/``while`` whose body holds it: the epoch loop, also when the pass
runs in a helper it calls), at the first statement of its body (the start of the epoch, where
PyTorch's docs put ``set_epoch``, also when the body does other work before the pass), naming
the line that built the sampler (the watcher notes where user code builds each
``DistributedSampler``) and the line that started the pass; without such a loop (passes in a
notebook's separate cells), at the sampler's construction. When the user's code did call
``set_epoch`` on the sampler (the watcher notes the line of its latest call), the repeated epoch
came from that call (run once before the loop, or with a constant): reported at that call,
saying which, with the line that started the pass in the message.
Visible in a single process too (``DistributedSampler(ds, num_replicas=1, rank=0)``).

Silent on: ``shuffle=False`` samplers (validation); a sampler that a DataLoader iterates, iterated
by the user's code too (``list(train_sampler)[:4]`` printed in the epoch, before or after the
DataLoader's pass: only the DataLoader's passes are epochs); samplers whose ``epoch`` changes
between passes (``set_epoch`` called, or trainguard's loop, which calls it); a sampler iterated
once.

Cost: per ``DistributedSampler`` pass, two integers compared; once, at the finding, a parse of
the files of 8 user frames at most.

Reference: the ``DistributedSampler`` docs ("calling the set_epoch() method at the beginning of
each epoch before creating the DataLoader iterator is necessary to make shuffling work properly
across multiple epochs", https://pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler).
"""

from __future__ import annotations

import ast
import sys
import weakref
from typing import Any

from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.bounds import parse_file
from trainguard.sanitize.core.frames import (is_trainguard_file, short_location, user_frame,
                                            user_frames, user_location)


class SamplerEpochNotSet(Check):
    code = "TG601"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.last_epoch: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self.reported: weakref.WeakSet[Any] = weakref.WeakSet()
        self.built: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self.loaded: weakref.WeakSet[Any] = weakref.WeakSet()  # iterated by a DataLoader
        # sampler -> its user set_epoch calls counted at its latest pass (State.epoch_set)
        self.set_calls: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()

    def on_built(self, obj: Any, where: Any) -> None:
        if hasattr(obj, "set_epoch") and where is not None:  # a DistributedSampler
            self.built[obj] = where

    def on_sampler_iter(self, sampler: Any) -> None:
        if not getattr(sampler, "shuffle", False) or sampler in self.reported:
            return
        by_loader = _by_data_loader(sys._getframe(1))
        if by_loader:
            if sampler not in self.loaded:  # looks taken before its first pass were no epochs
                self.last_epoch.pop(sampler, None)
            self.loaded.add(sampler)
        elif sampler in self.loaded:
            return  # ``list(sampler)[:4]`` printed beside the DataLoader's passes: no epoch
        epoch = getattr(sampler, "epoch", None)
        previous = self.last_epoch.get(sampler)
        self.last_epoch[sampler] = epoch
        set_at, calls = self.state.epoch_set.get(sampler, (None, 0))
        calls_before, self.set_calls[sampler] = self.set_calls.get(sampler, 0), calls
        if previous is None or previous != epoch:
            return
        self.reported.add(sampler)
        built = self.built.get(sampler)
        made = f" built at {short_location(built)}" if built else ""
        started = f"(this pass started at {short_location(user_location())})"
        if set_at is not None:  # set, but to the epoch it already had: the call is the fault
            again = (f"set_epoch() at {short_location(set_at)} set the same epoch={epoch} again"
                     if calls > calls_before else
                     f"set_epoch() ran at {short_location(set_at)} and not again since: it runs "
                     "once, outside the loop that repeats the passes")
            self.report(
                f"the shuffling DistributedSampler{made} started another pass with "
                f"epoch={epoch} {started}, the same as the pass before: {again}, so every "
                "epoch repeats the same order on every rank",
                fix="call sampler.set_epoch(epoch) with the current epoch at the start of every "
                    "epoch, inside the epoch loop, before iterating the DataLoader",
                where=set_at)
            return
        loop = _epoch_loop(sys._getframe(1))
        self.report(
            f"the shuffling DistributedSampler{made} started another pass with "
            f"epoch={epoch} {started}, the same as the pass before: set_epoch() was not called "
            "in this loop, so every epoch repeats the same order on every rank",
            fix="call sampler.set_epoch(epoch) at the start of every epoch, before iterating "
                "the DataLoader",
            where=loop or built)


def _by_data_loader(frame: Any) -> bool:
    """Whether the pass was started by PyTorch's data loading code (a DataLoader's iterator or
    ``BatchSampler``), not by user code iterating the sampler itself."""
    while frame is not None and is_trainguard_file(frame.f_code.co_filename):
        frame = frame.f_back
    name = frame.f_code.co_filename.replace("\\", "/") if frame is not None else ""
    return "/torch/utils/data/" in name


def _epoch_loop(start: Any) -> Any:
    """``(path, line, col)`` of the first statement of the loop that repeats the passes over the
    DataLoader: from the user's frame that started this pass outwards, the innermost
    ``for``/``while`` whose body holds the frame's current line (not the ``for`` over the
    DataLoader itself, whose header is that line). ``set_epoch`` belongs at the top of that body,
    before anything of the epoch runs. None when no user frame's function has one."""
    for frame in user_frames(user_frame(start), limit=8):
        path, line = frame.f_code.co_filename, frame.f_lineno
        tree = parse_file(path)
        if tree is None:
            continue
        best = None
        for node in ast.walk(tree):
            if isinstance(node, (ast.For, ast.AsyncFor, ast.While)) and node.body \
                    and node.body[0].lineno <= line <= (node.end_lineno or 0) \
                    and (best is None or node.lineno > best.lineno):
                best = node
        if best is not None:
            first = best.body[0]
            return (path, first.lineno, first.col_offset + 1)
    return None
