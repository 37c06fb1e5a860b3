"""From command-line choices to normalized train and validation datasets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from trainguard.data.dataset import ImageTensorDataset, channel_stats
from trainguard.data.images import ImageSpec, read_csv_dataset, read_folder_dataset
from trainguard.data.split import stratified_split
from trainguard.errors import DataError

__all__ = ["DataConfig", "build_datasets"]


@dataclass(frozen=True)
class DataConfig:
    """What ``trainguard train`` reads (see ``trainguard train --help``)."""

    data: Literal["digits", "csv", "folder"] = "digits"
    csv: str | None = None
    root: str | None = None
    val_csv: str | None = None
    val_root: str | None = None
    val_fraction: float = 0.2
    channels: Literal[1, 3] = 1
    image_size: tuple[int, int] | None = None
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    path_column: str | None = None
    label_column: str = "label"
    num_classes: int | None = None
    seed: int = 0


def _load_train(cfg: DataConfig, spec: ImageSpec) -> ImageTensorDataset:
    if cfg.data == "digits":
        from trainguard.data.digits import load_digits_dataset

        return load_digits_dataset()
    if cfg.data == "csv":
        if not cfg.csv or not cfg.root:
            raise DataError("--data csv needs --csv FILE and --root DIR (the folder the image "
                            "paths are relative to)")
        return read_csv_dataset(cfg.csv, cfg.root, spec, path_column=cfg.path_column,
                                label_column=cfg.label_column, num_classes=cfg.num_classes)
    if cfg.data == "folder":
        if not cfg.root:
            raise DataError("--data folder needs --root DIR holding one sub-folder per class")
        return read_folder_dataset(cfg.root, spec)
    raise DataError(f"--data must be digits, csv or folder, got {cfg.data!r}")


def _load_val(cfg: DataConfig, spec: ImageSpec,
              train: ImageTensorDataset) -> ImageTensorDataset | None:
    if cfg.data == "csv" and cfg.val_csv:
        val = read_csv_dataset(cfg.val_csv, cfg.val_root or cfg.root, spec,
                               path_column=cfg.path_column, label_column=cfg.label_column,
                               num_classes=train.num_classes)
        return ImageTensorDataset(val.images, val.labels, scale=val.scale, mean=val.mean.view(-1),
                                  std=val.std.view(-1), classes=train.classes)
    if cfg.data == "folder" and cfg.val_root:
        return read_folder_dataset(cfg.val_root, spec, classes=train.classes)
    if cfg.val_csv or cfg.val_root:
        raise DataError("--val-csv goes with --data csv and --val-root with --data folder "
                        "(or with --val-csv, as the folder its paths are relative to)")
    return None


def build_datasets(cfg: DataConfig) -> tuple[ImageTensorDataset, ImageTensorDataset]:
    """Read the training data, split or read the validation data, and normalize both with the
    training split's per-channel mean and std (or the ``mean``/``std`` given).

    Raises:
        DataError: any bad input; the message names the file and row or the argument.
    """
    spec = ImageSpec(channels=cfg.channels, image_size=cfg.image_size)
    full = _load_train(cfg, spec)
    val = _load_val(cfg, spec, full)
    if val is None:
        train_idx, val_idx = stratified_split(full.labels, val_fraction=cfg.val_fraction,
                                              seed=cfg.seed)
        train, val = full.subset(train_idx), full.subset(val_idx)
    else:
        train = full
        if val.input_shape != train.input_shape:
            raise DataError(f"validation images are {val.input_shape} (C, H, W) but training "
                            f"images are {train.input_shape}; pass --image-size")
    channels = train.input_shape[0]
    if cfg.mean is not None or cfg.std is not None:
        if cfg.mean is None or cfg.std is None or len(cfg.mean) != channels \
                or len(cfg.std) != channels:
            raise DataError(f"--mean and --std need {channels} value(s) each (one per channel), "
                            f"got mean={cfg.mean} std={cfg.std}")
        if any(s <= 0 for s in cfg.std):
            raise DataError(f"--std values must be > 0, got {cfg.std}")
        mean, std = torch.tensor(cfg.mean), torch.tensor(cfg.std)
    else:
        stats = channel_stats(train.images, train.scale)
        mean, std = stats.mean, stats.std
    return train.with_stats(mean, std), val.with_stats(mean, std)
