"""Seeding every RNG a training run draws from, and seeding DataLoader workers.

Follows PyTorch's reproducibility notes
(https://pytorch.org/docs/stable/notes/randomness.html): seed ``random``, numpy and torch (CPU and
every CUDA device), give each DataLoader a seeded ``generator``, and seed numpy and ``random`` in
each worker from ``torch.initial_seed()``, which PyTorch sets to ``base_seed + worker_id``.
"""

from __future__ import annotations

import os
import random

import numpy as np
import torch

__all__ = ["seed_everything", "seed_worker", "derive_seed", "set_deterministic"]

_MASK63 = (1 << 63) - 1


def seed_everything(seed: int) -> int:
    """Seed ``random``, numpy, and torch on the CPU and on every CUDA device.

    Args:
        seed: any integer; numpy receives it modulo 2**32.

    Returns:
        The seed, so that it can be logged.

    Raises:
        TypeError: ``seed`` is not an ``int``.

    Example::

        >>> import trainguard
        >>> trainguard.seed_everything(0)
        0
    """
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {type(seed).__name__} {seed!r}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device (torch.cuda.manual_seed_all)
    return seed


def derive_seed(seed: int, *keys: int) -> int:
    """A 63-bit seed derived from ``seed`` and integer ``keys`` (epoch, rank, ...), stable across
    runs and platforms (a SplitMix64-style mix, no Python ``hash``)."""
    x = seed & 0xFFFFFFFFFFFFFFFF
    for k in keys:
        x = (x ^ (k + 0x9E3779B97F4A7C15 + (x << 6) + (x >> 2))) & 0xFFFFFFFFFFFFFFFF
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        x ^= x >> 31
    return x & _MASK63


def seed_worker(worker_id: int) -> None:
    """``worker_init_fn`` that seeds numpy and ``random`` inside a DataLoader worker.

    PyTorch seeds torch in each worker with ``base_seed + worker_id`` but leaves numpy and
    ``random`` as forked, so every worker would draw the same numbers from them (see
    https://pytorch.org/docs/stable/data.html#randomness-in-multi-process-data-loading).
    """
    worker_seed = torch.initial_seed() % 2**32
    np.random.seed(worker_seed)
    random.seed(worker_seed)


def set_deterministic(enabled: bool = True) -> None:
    """Ask PyTorch for deterministic kernels (or stop asking).

    Sets ``torch.use_deterministic_algorithms``, ``cudnn.deterministic`` and turns
    ``cudnn.benchmark`` off, and sets ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` when unset, which cuBLAS
    needs for deterministic results on CUDA >= 10.2 (PyTorch docs, "Reproducibility").
    """
    if enabled:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(enabled)
    torch.backends.cudnn.deterministic = enabled
    torch.backends.cudnn.benchmark = False if enabled else torch.backends.cudnn.benchmark
