"""TG601 sampler-epoch-not-set: a ``DistributedSampler`` reshuffles every epoch the same way.

What it watches: each time a ``DistributedSampler`` starts iterating (once per epoch), its
``shuffle`` flag and its ``epoch`` attribute.

When it fires: a shuffling sampler starts a second pass with the same ``epoch`` value as the pass
before: ``set_epoch(epoch)`` was not called between them, so its permutation, seeded by ``seed +
epoch``, repeats and every epoch sees the same order. Reported once per sampler where the missing
call belongs: in the loop that repeats the passes (from the user's frame that started the pass
outwards, the innermost ``for``/``while`` whose body holds it: the epoch loop, also when the pass
runs in a helper it calls), the statement that runs the pass (the ``for`` over the DataLoader, or
the call of that helper: ``set_epoch`` goes right above it; when user code read the sampler's own
order earlier in that epoch, in a statement of the same loop body, that statement: the order it
read was this epoch's too), naming the line that built the sampler
(the watcher notes where user code builds each ``DistributedSampler``) and the line that started the
pass; without such a loop (passes in a notebook's separate cells), at the sampler's construction.
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
from trainguard.sanitize.core.callstack import body_statement
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
        # the user frames' lines of user code's own pass over the sampler since its last
        # DataLoader pass (``list(iter(sampler))`` logged at the top of the epoch)
        self.read: weakref.WeakKeyDictionary[Any, list] = weakref.WeakKeyDictionary()

    def on_built(self, obj: Any, where: Any) -> None:
        if hasattr(obj, "set_epoch") and where is not None:  # a DistributedSampler
            self.built[obj] = where

    def on_sampler_iter(self, sampler: Any) -> None:
        if not getattr(sampler, "shuffle", False) or sampler in self.reported:
            return
        by_loader = _by_data_loader(sys._getframe(1))
        read = self.read.pop(sampler, None) if by_loader else None
        if by_loader:
            if sampler not in self.loaded:  # looks taken before its first pass were no epochs
                self.last_epoch.pop(sampler, None)
            self.loaded.add(sampler)
        else:
            self.read[sampler] = [(f.f_code.co_filename, f.f_lineno)
                                  for f in user_frames(user_frame(sys._getframe(1)), limit=8)]
            if sampler in self.loaded:
                return  # ``list(sampler)[:4]`` printed beside the DataLoader's passes: no epoch
        epoch = getattr(sampler, "epoch", None)
        previous = self.last_epoch.get(sampler)
        self.last_epoch[sampler] = epoch
        if previous is not None and previous == epoch:
            self.reported.add(sampler)
            built = self.built.get(sampler)
            loop = _epoch_loop(sys._getframe(1), read or [])
            made = f" built at {short_location(built)}" if built else ""
            self.report(
                f"the shuffling DistributedSampler{made} started another pass with "
                f"epoch={epoch} (this pass started at {short_location(user_location())}), the "
                "same as the pass before: set_epoch() was not called in this loop, so every "
                "epoch repeats the same order on every rank",
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


def _epoch_loop(start: Any, read: list) -> Any:
    """``(path, line, col)`` of the loop that repeats the passes over the DataLoader: from the
    user's frame that started this pass outwards, the innermost ``for``/``while`` whose body holds
    the frame's current line (not the ``for`` over the DataLoader itself, whose header is that
    line), and there the statement of its body that runs the pass: ``set_epoch`` belongs right
    above it, or above an earlier statement of that body that read the sampler's order itself
    (``read``: the user frames' ``(path, line)`` of that read). None when no user frame's
    function has one."""
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
            # the statement of its body that runs the pass (the ``for`` over the DataLoader, or
            # the call of the helper that iterates it): set_epoch goes right above it
            stmt = body_statement(best.body, line) or best
            earlier = [body_statement(best.body, seen) for at, seen in read if at == path
                       and best.body[0].lineno <= seen <= (best.end_lineno or 0)]
            stmt = min([s for s in earlier if s is not None and s.lineno < stmt.lineno]
                       + [stmt], key=lambda s: s.lineno)
            return (path, stmt.lineno, stmt.col_offset + 1)
    return None
