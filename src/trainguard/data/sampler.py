"""``EpochBatchSampler``: batches whose order is a pure function of (seed, epoch), so a run can be
resumed mid-epoch at exactly the next batch, and sharded across DDP ranks."""

from __future__ import annotations

import math
from typing import Iterator

import torch
from torch.utils.data import Sampler

from trainguard.ckpt.seeding import derive_seed

__all__ = ["EpochBatchSampler"]


class EpochBatchSampler(Sampler[list[int]]):
    """Yields lists of dataset indices, reshuffled each epoch from ``(seed, epoch)`` alone.

    Args:
        num_samples: dataset length.
        batch_size: samples per batch (per rank).
        shuffle: permute each epoch (training) or keep dataset order (evaluation).
        seed: the permutation of epoch ``e`` is ``randperm`` under ``derive_seed(seed, e)``.
        drop_last: drop a final partial batch.
        drop_last_single: drop a final batch of exactly one sample even when ``drop_last`` is
            False: BatchNorm cannot train on one value per channel (PyTorch raises "Expected more
            than 1 value per channel when training").
        num_replicas, rank: shard for DDP like ``DistributedSampler``: the permutation is padded
            by repeating its start to a multiple of ``num_replicas`` and rank ``r`` takes every
            ``num_replicas``-th index from ``r``.

    Call :meth:`set_epoch` before each epoch, and :meth:`skip` to start an epoch at a later batch.
    """

    def __init__(self, num_samples: int, batch_size: int, *, shuffle: bool, seed: int = 0,
                 drop_last: bool = False, drop_last_single: bool = False, num_replicas: int = 1,
                 rank: int = 0) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if num_samples < 1:
            raise ValueError("cannot sample batches from an empty dataset")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} is not in [0, {num_replicas})")
        self.num_samples, self.batch_size = num_samples, batch_size
        self.shuffle, self.seed = shuffle, seed
        self.drop_last, self.drop_last_single = drop_last, drop_last_single
        self.num_replicas, self.rank = num_replicas, rank
        self.epoch = 0
        self._skip = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self._skip = 0

    def skip(self, batches: int) -> None:
        """Start the next iteration at batch ``batches`` of the current epoch (once)."""
        self._skip = batches

    def _indices(self) -> list[int]:
        if self.shuffle:
            gen = torch.Generator().manual_seed(derive_seed(self.seed, self.epoch))
            order = torch.randperm(self.num_samples, generator=gen).tolist()
        else:
            order = list(range(self.num_samples))
        if self.num_replicas > 1:
            total = math.ceil(self.num_samples / self.num_replicas) * self.num_replicas
            order += (order * math.ceil(total / len(order)))[: total - len(order)]
            order = order[self.rank::self.num_replicas]
        return order

    def _per_rank(self) -> int:
        return math.ceil(self.num_samples / self.num_replicas)

    def __len__(self) -> int:
        n = self._per_rank()
        full, rest = divmod(n, self.batch_size)
        if rest and not self.drop_last and not (self.drop_last_single and rest == 1 and full):
            full += 1
        return full

    def __iter__(self) -> Iterator[list[int]]:
        order = self._indices()
        count = len(self)
        start, self._skip = self._skip, 0
        for b in range(start, count):
            yield order[b * self.batch_size:(b + 1) * self.batch_size]
