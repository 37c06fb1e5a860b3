"""DataLoaders as trainguard builds them: epoch-seeded batch order, a seeded generator for the
workers' base seed, and ``seed_worker`` for numpy and ``random`` inside each worker."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, Dataset, Subset

from trainguard.ckpt.seeding import derive_seed, seed_worker
from trainguard.data.sampler import EpochBatchSampler

__all__ = ["make_loader"]


def make_loader(dataset: Dataset, *, batch_size: int, train: bool, seed: int,
                num_workers: int = 0, pin_memory: bool = False, num_replicas: int = 1,
                rank: int = 0) -> DataLoader:
    """A reproducible DataLoader over ``dataset``.

    Args:
        dataset: a map-style dataset.
        batch_size: samples per batch (per rank under DDP).
        train: shuffle each epoch and drop a final batch of one sample (BatchNorm cannot train on
            it); evaluation loaders keep order and every sample.
        seed: the run's seed; batch order and worker seeds derive from it.
        num_workers: worker processes (0 loads in the main process).
        pin_memory: page-locked host memory for faster copies to CUDA.
        num_replicas, rank: DDP sharding. Training loaders shard like ``DistributedSampler``
            (see :class:`EpochBatchSampler`: padded so every rank steps equally often);
            evaluation loaders take samples ``rank, rank + num_replicas, ...`` without padding,
            so metrics reduced over ranks count every sample exactly once.

    Raises:
        ValueError: ``num_workers`` < 0 or ``batch_size`` < 1.
    """
    if num_workers < 0:
        raise ValueError(f"num_workers must be >= 0, got {num_workers} (0 disables worker "
                         "processes)")
    shard = {"num_replicas": num_replicas, "rank": rank}
    if not train and num_replicas > 1:
        dataset = Subset(dataset, range(rank, len(dataset), num_replicas))
        shard = {"num_replicas": 1, "rank": 0}
    sampler = EpochBatchSampler(len(dataset), batch_size, shuffle=train, seed=seed,
                                drop_last_single=train, **shard)
    generator = torch.Generator().manual_seed(derive_seed(seed, 0x10AD, rank))
    return DataLoader(dataset, batch_sampler=sampler, num_workers=num_workers,
                      worker_init_fn=seed_worker, generator=generator, pin_memory=pin_memory)
