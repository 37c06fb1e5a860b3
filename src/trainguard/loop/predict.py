"""``trainguard predict``: class predictions of a trained run for image files.

The images go through the run's validation preprocessing: decoded to the run's channels, resized
to its ``--image-size`` when it had one, scaled to ``[0, 1]`` and normalized with the training
split's ``mean`` and ``std`` stored in the checkpoint; the model runs in ``eval()`` mode under
``torch.inference_mode()`` in batches.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, Iterator, Sequence

import torch

from trainguard.ckpt.checkpoint import load_model_state
from trainguard.ckpt.io import load_verified
from trainguard.data.dataset import ImageTensorDataset
from trainguard.data.images import IMAGE_EXTENSIONS, PATH_COLUMNS, ImageSpec, decode_image
from trainguard.data.loaders import make_loader
from trainguard.errors import CheckpointError, DataError
from trainguard.loop.precision import Amp
from trainguard.loop.rundir import atomic_write_text
from trainguard.models import build_model

__all__ = ["load_run", "image_paths", "predict", "write_predictions"]

COLUMNS = ["path", "class_index", "class_name", "probability"]


def load_run(run_dir: str | Path, checkpoint: str = "best") -> tuple[Path, dict[str, Any]]:
    """The checkpoint to predict with: ``best`` (``best.pt``), ``last`` or a file.

    Raises:
        CheckpointError: no such run or checkpoint, a damaged one, or one that lacks what a
            prediction needs (written by ``fit`` with a model of one's own, or by a trainguard
            that did not store class names and normalization).
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise CheckpointError(f"run directory not found: {run_dir}")
    path = run_dir / f"{checkpoint}.pt" if checkpoint in ("best", "last") else Path(checkpoint)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path} (--checkpoint best, last or a file)")
    payload = load_verified(path)
    if payload.get("config", {}).get("cli") is None:
        raise CheckpointError(f"{path} was not written by `trainguard train`, so the model "
                              "cannot be rebuilt by name; in Python: model.load_state_dict("
                              "trainguard.load_checkpoint(path)['model'])")
    data = payload.get("data") or {}
    if not {"classes", "input_shape", "normalization"} <= set(data):
        raise CheckpointError(f"{path} holds no class names and normalization (written by an "
                              "older trainguard); train the run again to predict with it")
    return path, payload


def _csv_paths(csv_path: Path, root: Path | None, column: str | None) -> Iterator[tuple]:
    try:
        with csv_path.open(newline="", encoding="utf-8-sig") as fh:
            rows = [r for r in csv.reader(fh) if any(c.strip() for c in r)]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"{csv_path}: cannot read CSV: {exc}") from exc
    header = [h.strip() for h in rows[0]] if rows else []
    column = column or next((c for c in PATH_COLUMNS if c in header), None)
    if column is None or column not in header:
        raise DataError(f"{csv_path}: no image path column in header {header}; expected one of "
                        f"{list(PATH_COLUMNS)} (or pass --path-column)")
    index, base = header.index(column), root or csv_path.parent
    for line, row in enumerate(rows[1:], start=2):
        where = f"{csv_path} line {line}"
        if len(row) <= index or not row[index].strip():
            raise DataError(f"{where}: no image path in column {column!r}")
        yield row[index].strip(), base / row[index].strip(), where


def image_paths(paths: Sequence[str], *, root: str | None = None,
                path_column: str | None = None) -> list[tuple[str, Path, str]]:
    """``(shown path, file, where)`` for every image: files as given, the images under folders
    (recursively, sorted), and the rows of ``.csv`` files (relative to ``root``, default the
    CSV's folder). ``where`` names the file or CSV row in errors.

    Raises:
        DataError: a path that does not exist, a folder without images, a CSV without a path
            column or with an empty path.
    """
    found: list[tuple[str, Path, str]] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            images = sorted(p for p in path.rglob("*")
                            if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS)
            if not images:
                raise DataError(f"{given}: the folder holds no images "
                                f"({', '.join(IMAGE_EXTENSIONS)})")
            found += [(str(p), p, str(p)) for p in images]
        elif path.suffix.lower() == ".csv" and path.is_file():
            found += list(_csv_paths(path, Path(root) if root else None, path_column))
        elif path.is_file():
            found.append((given, path, given))
        else:
            raise DataError(f"{given}: no such file or folder")
    if not found:
        raise DataError("no images to predict: the CSV lists none")
    return found


def _images(items: list[tuple[str, Path, str]], cli: dict[str, Any],
            input_shape: Sequence[int]) -> torch.Tensor:
    size = cli.get("image_size")
    spec = ImageSpec(channels=int(input_shape[0]), image_size=tuple(size) if size else None)
    images = []
    for _, path, where in items:
        image = decode_image(path, spec, where)
        if list(image.shape) != list(input_shape):
            raise DataError(f"{where}: image is {image.shape[2]}x{image.shape[1]} (WxH) but the "
                            f"model was trained on {input_shape[2]}x{input_shape[1]} images; "
                            "resize it (or train with --image-size)")
        images.append(image)
    return torch.stack(images)


def predict(payload: dict[str, Any], items: list[tuple[str, Path, str]], *,
            device: torch.device, batch_size: int = 256, progress: Any = None
            ) -> list[tuple[str, int, str, float]]:
    """``(shown path, class index, class name, probability)`` per image, in order.

    Every image is decoded and checked before the model runs, so a bad file stops the run
    before anything is predicted.
    """
    cli, data = payload["config"]["cli"], payload["data"]
    classes, shape = data["classes"], data["input_shape"]
    norm = data["normalization"]
    dataset = ImageTensorDataset(_images(items, cli, shape), torch.zeros(len(items)),
                                 scale=1 / 255, mean=torch.tensor(norm["mean"]),
                                 std=torch.tensor(norm["std"]), classes=classes)
    model = build_model(cli["model"], input_shape=tuple(shape), num_classes=len(classes))
    load_model_state(model, payload["model"], source="the checkpoint")
    model.to(device).eval()
    precision = cli.get("precision", "32")  # the autocast validation ran under
    amp = Amp(device, "32" if precision == "fp16" and device.type != "cuda" else precision)
    loader = make_loader(dataset, batch_size=batch_size, train=False, seed=0)
    out: list[tuple[str, int, str, float]] = []
    with torch.inference_mode():
        for inputs, _ in loader:
            with amp.autocast():
                logits = model(inputs.to(device))
            probs = torch.softmax(logits.float(), dim=1)
            best, index = probs.max(dim=1)
            for p, i in zip(best.tolist(), index.tolist()):
                shown = items[len(out)][0]
                out.append((shown, i, classes[i], p))
            if progress is not None:
                progress(len(out))
    return out


def write_predictions(rows: list[tuple[str, int, str, float]], path: str | Path) -> Path:
    """``predictions.csv``: ``path,class_index,class_name,probability``, written atomically."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows((p, i, name, f"{prob:.6f}") for p, i, name, prob in rows)
    path = Path(path)
    atomic_write_text(path, buf.getvalue())
    return path
