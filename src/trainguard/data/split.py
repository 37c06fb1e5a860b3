"""Seeded, stratified train/validation split."""

from __future__ import annotations

import torch

from trainguard.errors import DataError

__all__ = ["stratified_split"]


def stratified_split(labels: torch.Tensor, *, val_fraction: float,
                     seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Split indices so that each class keeps its proportion in both parts.

    Args:
        labels: ``(N,)`` integer class labels.
        val_fraction: fraction of samples for validation, in ``(0, 1)``.
        seed: the split depends on nothing else.

    Returns:
        ``(train_indices, val_indices)``, each sorted ``int64`` ``(M,)``.

    Raises:
        DataError: the fraction is out of range, or a class has too few samples to split.
    """
    from sklearn.model_selection import train_test_split

    if not 0.0 < val_fraction < 1.0:
        raise DataError(f"--val-fraction must be between 0 and 1 (exclusive), got {val_fraction}")
    indices = torch.arange(labels.shape[0]).numpy()
    try:
        train_idx, val_idx = train_test_split(indices, test_size=val_fraction,
                                              stratify=labels.numpy(), random_state=seed % 2**32)
    except ValueError as exc:
        counts = torch.bincount(labels)
        rare = [i for i, c in enumerate(counts.tolist()) if 0 < c < 2]
        raise DataError(
            f"cannot split {labels.shape[0]} samples with --val-fraction {val_fraction} "
            f"stratified by class ({exc}); classes with a single sample: {rare or 'none'}; "
            "give a validation set with --val-csv/--val-root, or more data per class"
        ) from exc
    return torch.from_numpy(train_idx).sort().values, torch.from_numpy(val_idx).sort().values
