"""``trainguard predict RUN_DIR PATH...``: predictions.csv from a run's checkpoint."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from trainguard.loop.cliargs import HelpFormatter, positive

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "predict", help="predict classes of images with a trained run",
        description="Predict the class of each image with a run of `trainguard train`: the "
        "run's validation preprocessing (channels, size, normalization from the checkpoint), "
        "eval() mode, torch.inference_mode(), batches. Writes a CSV with the columns path, "
        "class_index, class_name, probability.",
        formatter_class=HelpFormatter)
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory of `trainguard train`")
    p.add_argument("paths", metavar="PATH", nargs="+",
                   help="image files, folders of images (searched recursively) or CSV files "
                   "with a path column")
    p.add_argument("--checkpoint", default="best",
                   help="best (best.pt), last (last.pt) or a checkpoint file")
    p.add_argument("--output", default="predictions.csv", help="the CSV to write")
    p.add_argument("--root", help="folder the paths in CSV files are relative to (default: "
                   "each CSV's own folder)")
    p.add_argument("--path-column", help="CSV column of image paths (default: path, image, "
                   "file, filename, filepath or image_path)")
    p.add_argument("--batch-size", type=positive(int), default=256, help="images per batch")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    p.add_argument("--progress", choices=["auto", "bar", "plain", "none"], default="auto",
                   help="auto: a bar on a terminal, a final line otherwise")
    p.set_defaults(func=run)


def _bar(mode: str, total: int) -> tuple[Any, Any]:
    """A rich progress bar over ``total`` images (``(None, None)`` unless shown)."""
    if mode == "auto":
        mode = "bar" if sys.stderr.isatty() else "plain"
    if mode != "bar":
        return None, None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    bar = Progress("predict", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                   console=Console(file=sys.stderr), transient=True)
    task = bar.add_task("predict", total=total)
    return bar, lambda done: bar.update(task, completed=done)


def run(args: argparse.Namespace) -> int:
    from trainguard.loop.device import resolve_device
    from trainguard.loop.predict import image_paths, load_run, predict, write_predictions

    path, payload = load_run(args.run_dir, args.checkpoint)
    items = image_paths(args.paths, root=args.root, path_column=args.path_column)
    device = resolve_device(args.device)
    bar, advance = _bar(args.progress, len(items))
    if bar is not None:
        bar.start()
    try:
        rows = predict(payload, items, device=device, batch_size=args.batch_size,
                       progress=advance)
    finally:
        if bar is not None:
            bar.stop()
    out = write_predictions(rows, args.output)
    if args.progress != "none":
        print(f"trainguard predict: {len(rows)} image(s) with {path} (after epoch {payload['epoch']},"
              f" step {payload['step']}) -> {out}", file=sys.stderr)
    return 0
