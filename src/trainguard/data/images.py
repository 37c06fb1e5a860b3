"""Image datasets from a CSV of paths and labels, or from a folder of class sub-folders.

Every image is opened, fully decoded, converted and resized before training starts, so a missing,
unreadable or truncated file stops the run up front with its file and row, not hours later. The
decoded images are kept in memory as ``uint8``.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

from trainguard.data.dataset import ImageTensorDataset
from trainguard.errors import DataError

__all__ = ["ImageSpec", "read_csv_dataset", "read_folder_dataset", "decode_image",
           "IMAGE_EXTENSIONS", "PATH_COLUMNS"]

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm",
                    ".pgm")
PATH_COLUMNS = ("path", "image", "file", "filename", "filepath", "image_path")


@dataclass(frozen=True)
class ImageSpec:
    """How images are brought to one form.

    Attributes:
        channels: 1 (grey, PIL mode ``"L"``) or 3 (PIL mode ``"RGB"``).
        image_size: ``(H, W)`` in pixels to resize to; ``None`` keeps the size of the first image
            and requires every image to have it.
    """

    channels: Literal[1, 3] = 1
    image_size: tuple[int, int] | None = None


def decode_image(path: Path, spec: ImageSpec, where: str) -> torch.Tensor:
    """Open and fully decode one image as ``(C, H, W)`` ``uint8``; ``where`` names it in errors."""
    from PIL import Image, UnidentifiedImageError

    if not path.is_file():
        raise DataError(f"{where}: image not found: {path}")
    try:
        with Image.open(path) as img:
            img.load()  # decode now: a truncated file fails here, not mid-training
            img = img.convert("L" if spec.channels == 1 else "RGB")
            if spec.image_size is not None and img.size != (spec.image_size[1],
                                                            spec.image_size[0]):
                img = img.resize((spec.image_size[1], spec.image_size[0]),
                                 Image.Resampling.BILINEAR)
            data = torch.frombuffer(bytearray(img.tobytes()), dtype=torch.uint8)
            w, h = img.size
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise DataError(f"{where}: cannot read image {path}: {exc}") from exc
    return data.view(h, w, spec.channels).permute(2, 0, 1).contiguous()


def _stack(images: list[torch.Tensor], names: list[str], spec: ImageSpec) -> torch.Tensor:
    first = images[0].shape
    for img, name in zip(images, names):
        if img.shape != first:
            raise DataError(
                f"{name}: image is {img.shape[2]}x{img.shape[1]} (WxH) but the first image is "
                f"{first[2]}x{first[1]}; pass --image-size to resize every image to one size"
            )
    return torch.stack(images)


def _label(value: str, where: str, num_classes: int | None) -> int:
    text = value.strip()
    try:
        label = int(text)
    except ValueError:
        raise DataError(f"{where}: label {value!r} is not an integer class index") from None
    if label < 0 or (num_classes is not None and label >= num_classes):
        bound = f"[0, {num_classes})" if num_classes is not None else ">= 0"
        raise DataError(f"{where}: label {label} is out of range (class indices must be {bound})")
    return label


def read_csv_dataset(csv_path: str | Path, root: str | Path, spec: ImageSpec, *,
                     path_column: str | None = None, label_column: str = "label",
                     num_classes: int | None = None) -> ImageTensorDataset:
    """Read a CSV with a header, a path column (relative to ``root``) and an integer label column.

    Args:
        csv_path: the CSV file.
        root: folder the paths are relative to (absolute paths are used as they are).
        spec: channels and size to convert every image to.
        path_column: the column of image paths; default: the first of ``path``, ``image``,
            ``file``, ``filename``, ``filepath``, ``image_path`` present.
        label_column: the column of integer class indices (default ``label``).
        num_classes: labels must be below it; default: the largest label + 1.

    Returns:
        An un-normalized dataset; ``classes`` are ``"0"`` .. ``str(num_classes - 1)``.

    Raises:
        DataError: the CSV is missing, empty, malformed or lacks a column; an image is missing or
            unreadable; a label is not an integer or out of range. The message names the file and
            line (the header is line 1).
    """
    csv_path, root = Path(csv_path), Path(root)
    if not csv_path.is_file():
        raise DataError(f"CSV file not found: {csv_path}")
    if not root.is_dir():
        raise DataError(f"image root is not a folder: {root} (for {csv_path})")
    try:
        with csv_path.open(newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"{csv_path}: cannot read CSV: {exc}") from exc
    rows = [r for r in rows if any(cell.strip() for cell in r)]
    if not rows:
        raise DataError(f"{csv_path}: the CSV is empty; expected a header such as 'path,label' "
                        "and one row per image")
    header = [h.strip() for h in rows[0]]
    if path_column is None:
        path_column = next((c for c in PATH_COLUMNS if c in header), None)
        if path_column is None:
            raise DataError(f"{csv_path}: no image path column in header {header}; expected one "
                            f"of {list(PATH_COLUMNS)} (or pass --path-column)")
    for needed, flag in ((path_column, "--path-column"), (label_column, "--label-column")):
        if needed not in header:
            raise DataError(f"{csv_path}: column {needed!r} not in header {header} "
                            f"(choose another with {flag})")
    p_idx, l_idx = header.index(path_column), header.index(label_column)
    if len(rows) == 1:
        raise DataError(f"{csv_path}: the CSV has a header but no rows")
    images, labels, names = [], [], []
    for line_no, row in enumerate(rows[1:], start=2):
        where = f"{csv_path} line {line_no}"
        if len(row) != len(header):
            raise DataError(f"{where}: expected {len(header)} fields as in the header, "
                            f"got {len(row)}: {row}")
        rel = row[p_idx].strip()
        if not rel:
            raise DataError(f"{where}: empty image path in column {path_column!r}")
        labels.append(_label(row[l_idx], where, num_classes))
        images.append(decode_image(root / rel, spec, where))
        names.append(where)
    k = num_classes if num_classes is not None else max(labels) + 1
    if num_classes is None:
        empty = sorted(set(range(k)) - set(labels))
        if empty:
            raise DataError(
                f"{csv_path}: no row has label(s) {empty[:10]}{' ...' if len(empty) > 10 else ''}"
                f", yet the largest label {k - 1} makes {k} classes; a mistyped label? Fix it, or "
                f"pass --num-classes {k} if those classes are meant to be empty")
    return ImageTensorDataset(_stack(images, names, spec), torch.tensor(labels), scale=1 / 255,
                              mean=torch.zeros(spec.channels), std=torch.ones(spec.channels),
                              classes=[str(i) for i in range(k)])


def read_folder_dataset(root: str | Path, spec: ImageSpec, *,
                        classes: list[str] | None = None) -> ImageTensorDataset:
    """Read ``root/<class>/<image>``: one sub-folder per class, classes in sorted order.

    Args:
        root: the folder of class folders.
        spec: channels and size to convert every image to.
        classes: the class names to expect (e.g. the training set's, for a validation folder);
            default: the sorted sub-folder names.

    Raises:
        DataError: the folder is missing or holds no class folders or no images; a class folder
            is unknown or empty; an image cannot be read.
    """
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"image folder not found: {root}")
    found = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not found:
        raise DataError(f"{root}: no class sub-folders; expected {root}/<class>/<image>.png")
    if classes is None:
        classes = found
    unknown = sorted(set(found) - set(classes))
    if unknown:
        raise DataError(f"{root}: class folder(s) {unknown} are not among the training classes "
                        f"{classes}")
    images, labels, names = [], [], []
    for label, name in enumerate(classes):
        folder = root / name
        files = sorted(p for p in folder.iterdir()
                       if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS) \
            if folder.is_dir() else []
        if not files and name in found:
            raise DataError(f"{folder}: class folder holds no images "
                            f"({', '.join(IMAGE_EXTENSIONS)})")
        for path in files:
            images.append(decode_image(path, spec, str(path)))
            labels.append(label)
            names.append(str(path))
    return ImageTensorDataset(_stack(images, names, spec), torch.tensor(labels), scale=1 / 255,
                              mean=torch.zeros(spec.channels), std=torch.ones(spec.channels),
                              classes=list(classes))
