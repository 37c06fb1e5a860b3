"""Devices and batches: ``resolve_device``, moving a batch to the device, reading its size."""

from __future__ import annotations

from typing import Any

import torch

from trainguard.errors import UsageError

__all__ = ["resolve_device", "to_device", "split_batch", "batch_size"]


def resolve_device(device: str | torch.device) -> torch.device:
    """``"auto"`` is CUDA when available, else CPU; other values as ``torch.device`` reads them.

    Raises:
        UsageError: an unknown device string, or CUDA asked for but not available.
    """
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise UsageError(f"--device {device!r} is not a device (use auto, cpu, cuda or "
                         f"cuda:N): {exc}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"--device {device} asked for CUDA, but torch.cuda.is_available() is "
                         f"False (torch {torch.__version__}); use --device cpu")
    return dev


def to_device(obj: Any, device: torch.device) -> Any:
    """``obj`` with every tensor in it (also inside lists, tuples and dicts) on ``device``;
    tensors already there are returned as they are (what ``Tensor.to`` would return)."""
    if isinstance(obj, torch.Tensor):
        return obj if obj.device == device else obj.to(device, non_blocking=True)
    if isinstance(obj, tuple):
        return tuple([to_device(o, device) for o in obj])
    if isinstance(obj, list):
        return [to_device(o, device) for o in obj]
    if isinstance(obj, dict):
        return {k: to_device(v, device) for k, v in obj.items()}
    return obj


def split_batch(batch: Any) -> tuple[Any, Any]:
    """``(inputs, targets)`` of a batch.

    Raises:
        UsageError: the batch is not a pair.
    """
    if isinstance(batch, (list, tuple)) and len(batch) == 2:
        return batch[0], batch[1]
    raise UsageError(f"fit expects each batch to be (inputs, targets), got "
                     f"{type(batch).__name__} of length "
                     f"{len(batch) if hasattr(batch, '__len__') else '?'}; wrap your dataset so "
                     "that __getitem__ returns (input, target)")


def batch_size(targets: Any) -> int:
    """Samples in a batch: the first dimension of its targets (1 for a scalar target)."""
    if isinstance(targets, torch.Tensor) and targets.ndim > 0:
        return int(targets.shape[0])
    if isinstance(targets, (list, tuple)) and targets:
        return batch_size(targets[0])
    return 1
