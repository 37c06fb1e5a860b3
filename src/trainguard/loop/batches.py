"""The epoch's batches, in the order an uninterrupted run sees them, cut into accumulation
windows."""

from __future__ import annotations

from typing import Any, Iterator

import torch

from trainguard.ckpt.rng import capture_rng, restore_rng
from trainguard.data.sampler import EpochBatchSampler
from trainguard.loop.device import batch_size, split_batch

__all__ = ["loader_generators", "set_epoch", "epoch_batches", "windows"]

# One accumulation window: (batch, samples in it, its share of the window's samples) per
# micro-batch.
Window = list[tuple[tuple[Any, Any], int, float]]


def loader_generators(loader: Any) -> tuple[torch.Generator | None, torch.Generator | None]:
    """The DataLoader's generator (workers' base seed) and its sampler's, when they exist."""
    gen = getattr(loader, "generator", None)
    sampler_gen = getattr(getattr(loader, "sampler", None), "generator", None)
    return (gen if isinstance(gen, torch.Generator) else None,
            sampler_gen if isinstance(sampler_gen, torch.Generator) else None)


def set_epoch(loader: Any, epoch: int) -> None:
    """``set_epoch`` on the loader's batch sampler and sampler (``DistributedSampler``...)."""
    for holder in (getattr(loader, "batch_sampler", None), getattr(loader, "sampler", None)):
        if hasattr(holder, "set_epoch"):
            holder.set_epoch(epoch)


def epoch_batches(loop: Any) -> Iterator[Any]:
    """The current epoch's batches from ``batches_done`` on, with the same order and RNG stream
    as an uninterrupted run; sets ``loop.epoch_start_rng`` at a fresh epoch."""
    loader, state = loop.train_loader, loop.state
    set_epoch(loader, state.epoch)
    if state.batches_done and loop.epoch_start_rng is not None:
        # Replay the epoch's start: the iterator draws its shuffle and worker seeds from the
        # RNG state it had then; then skip what was trained and restore the RNG state of the
        # last completed step.
        restore_rng(loop.epoch_start_rng, *loop.generators)
        batch_sampler = getattr(loader, "batch_sampler", None)
        if isinstance(batch_sampler, EpochBatchSampler):
            batch_sampler.skip(state.batches_done)  # pure function of (seed, epoch): no reads
            it = iter(loader)
        else:
            it = iter(loader)
            for _ in range(state.batches_done):
                next(it)
        restore_rng(loop.resumed_rng, *loop.generators)
        loop.resumed_rng = None
        return it
    if loop.resumed_rng is not None:  # resumed at an epoch boundary
        restore_rng(loop.resumed_rng, *loop.generators)
        loop.resumed_rng = None
    loop.epoch_start_rng = capture_rng(*loop.generators)
    return iter(loader)


def windows(batches: Iterator[Any], size: int) -> Iterator[Window]:
    """Accumulation windows of ``size`` micro-batches; the epoch's last window may be shorter
    and still steps. Each micro-batch's share is its samples over the window's, so the window's
    gradient is that of one batch holding all of them."""
    if size == 1:  # the common case, without the bookkeeping below
        for batch in batches:
            pair = split_batch(batch)
            yield [(pair, batch_size(pair[1]), 1.0)]
        return
    window: list[tuple[Any, Any]] = []
    for batch in batches:
        window.append(split_batch(batch))
        if len(window) == size:
            yield _weighted(window)
            window = []
    if window:
        yield _weighted(window)


def _weighted(window: list[tuple[Any, Any]]) -> Window:
    sizes = [batch_size(targets) for _, targets in window]
    total = sum(sizes)
    return [(batch, n, n / total) for batch, n in zip(window, sizes)]
