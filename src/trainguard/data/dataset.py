"""``ImageTensorDataset``: decoded images held in memory, normalized on access."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import Dataset

__all__ = ["ImageTensorDataset", "channel_stats"]


class ImageTensorDataset(Dataset):
    """Images stored as one tensor, returned normalized as ``float32``.

    Args:
        images: ``(N, C, H, W)`` tensor, ``uint8`` (0-255) or ``float32``.
        labels: ``(N,)`` ``int64`` class indices in ``[0, num_classes)``.
        scale: multiplies the stored values to bring them into ``[0, 1]`` (1/255 for ``uint8``).
        mean, std: per-channel statistics of the scaled values, shape ``(C,)``; the returned
            image is ``(x * scale - mean) / std``.
        classes: class names, index ``i`` naming label ``i``.

    Each item is ``(image (C, H, W) float32, label int64 scalar)``. The data is a pure function of
    the index (no random augmentation), so DataLoader workers cannot change it.
    """

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, *, scale: float,
                 mean: torch.Tensor, std: torch.Tensor, classes: list[str]) -> None:
        if images.ndim != 4 or labels.ndim != 1 or images.shape[0] != labels.shape[0]:
            raise ValueError(f"images must be (N, C, H, W) and labels (N,), got "
                             f"{tuple(images.shape)} and {tuple(labels.shape)}")
        self.images = images
        self.labels = labels.to(torch.int64)
        self.scale = float(scale)
        self.mean = mean.to(torch.float32).view(-1, 1, 1)
        self.std = std.to(torch.float32).clamp_min(1e-8).view(-1, 1, 1)
        self.classes = list(classes)

    def __len__(self) -> int:
        return self.labels.shape[0]

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        # out of place: for float32 storage .to() returns a view of the stored image
        x = self.images[index].to(torch.float32) * self.scale
        return (x - self.mean) / self.std, self.labels[index]

    def __getitems__(self, indices: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """A whole batch at once (DataLoader calls this when it exists): one normalization over
        the batch instead of one per sample; the values equal ``__getitem__``'s."""
        idx = torch.as_tensor(indices, dtype=torch.int64)
        x = (self.images[idx].to(torch.float32) * self.scale - self.mean) / self.std
        return list(zip(x.unbind(0), self.labels[idx].unbind(0)))

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def input_shape(self) -> tuple[int, int, int]:
        c, h, w = self.images.shape[1:]
        return (int(c), int(h), int(w))

    def subset(self, indices: torch.Tensor) -> "ImageTensorDataset":
        """The same data restricted to ``indices`` (a copy), with the same normalization."""
        return ImageTensorDataset(self.images[indices], self.labels[indices], scale=self.scale,
                                  mean=self.mean.view(-1), std=self.std.view(-1),
                                  classes=self.classes)

    def with_stats(self, mean: torch.Tensor, std: torch.Tensor) -> "ImageTensorDataset":
        return ImageTensorDataset(self.images, self.labels, scale=self.scale, mean=mean, std=std,
                                  classes=self.classes)

    def describe(self) -> dict[str, Any]:
        """What predicting with a model trained on this data needs, as plain values:
        ``classes`` (index ``i`` names label ``i``), ``input_shape`` ``[C, H, W]`` and
        ``normalization``: ``{"mean": [...], "std": [...]}`` per channel of pixels scaled to
        ``[0, 1]`` (an input is ``(x - mean) / std``)."""
        return {"classes": list(self.classes), "input_shape": list(self.input_shape),
                "normalization": {"mean": self.mean.view(-1).tolist(),
                                  "std": self.std.view(-1).tolist()}}

    def signature(self) -> dict[str, int | str]:
        """A cheap fingerprint of the data (size, shape, label checksum) stored in checkpoints so
        that resuming on different data can be refused."""
        labels_sum = int((self.labels * torch.arange(1, len(self) + 1)).sum()) if len(self) else 0
        return {"n": len(self), "shape": "x".join(map(str, self.input_shape)),
                "classes": self.num_classes, "labels_checksum": labels_sum}


@dataclass(frozen=True)
class ChannelStats:
    mean: torch.Tensor
    std: torch.Tensor


def channel_stats(images: torch.Tensor, scale: float) -> ChannelStats:
    """Per-channel mean and standard deviation of ``images * scale`` over ``(N, H, W)``."""
    x = images.to(torch.float64) * scale
    mean = x.mean(dim=(0, 2, 3))
    std = x.std(dim=(0, 2, 3), unbiased=False)
    return ChannelStats(mean.to(torch.float32), std.to(torch.float32))
