"""``trainguard train``: train a model on the bundled digits, a CSV of images or an image folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from trainguard.errors import UsageError

__all__ = ["register", "run"]

# Settings that may differ on --resume without breaking the run's exactness.
FREE_ON_RESUME = {"device", "num_workers", "progress", "resume", "force", "run_dir", "guard"}


def _size(text: str) -> tuple[int, int]:
    try:
        parts = [int(p) for p in text.lower().replace("x", ",").split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or HxW, got {text!r}") from None
    if len(parts) == 1:
        parts *= 2
    if len(parts) != 2 or min(parts) < 1:
        raise argparse.ArgumentTypeError(f"expected N or HxW with positive sizes, got {text!r}")
    return parts[0], parts[1]


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(p) for p in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") \
            from None


def _positive(kind: type) -> Any:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {kind.__name__}, got {text!r}") \
                from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value
    parse.__name__ = kind.__name__
    return parse


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train", help="train a model with the reference loop",
        description="Train with trainguard's reference loop on the bundled digits (default), a "
        "CSV of image paths and labels, or a folder of class sub-folders. Writes metrics.csv, "
        "curves.png, summary.json, train.log and checkpoints to the run directory.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    d = p.add_argument_group("data")
    d.add_argument("--data", choices=["digits", "csv", "folder"], default="digits",
                   help="digits: scikit-learn's bundled 8x8 handwritten digits (1,797 images)")
    d.add_argument("--csv", help="CSV with a header, an image path column and a label column")
    d.add_argument("--root", help="folder the CSV paths are relative to, or the class folders")
    d.add_argument("--val-csv", help="validation CSV (default: split off --val-fraction)")
    d.add_argument("--val-root", help="validation image folder (or root for --val-csv paths)")
    d.add_argument("--val-fraction", type=float, default=0.2,
                   help="seeded stratified validation split when no validation set is given")
    d.add_argument("--channels", type=int, choices=[1, 3], default=1,
                   help="convert images to grey (1) or RGB (3)")
    d.add_argument("--image-size", type=_size, default=None,
                   help="resize images to N or HxW pixels (default: keep; all must match)")
    d.add_argument("--mean", type=_floats, help="per-channel mean of [0,1] pixels "
                   "(default: computed on the training split)")
    d.add_argument("--std", type=_floats, help="per-channel std (default: computed)")
    d.add_argument("--path-column", help="CSV column of image paths (default: path, image, "
                   "file, filename, filepath or image_path)")
    d.add_argument("--label-column", default="label", help="CSV column of integer labels")
    d.add_argument("--num-classes", type=_positive(int),
                   help="number of classes (default: largest label + 1)")
    t = p.add_argument_group("training")
    t.add_argument("--model", default="cnn", help="model from the registry: cnn or mlp")
    t.add_argument("--epochs", type=_positive(int), default=12)
    t.add_argument("--batch-size", type=_positive(int), default=32)
    t.add_argument("--lr", type=_positive(float), default=3e-3, help="peak learning rate")
    t.add_argument("--weight-decay", type=float, default=1e-4)
    t.add_argument("--scheduler", choices=["cosine", "none"], default="cosine",
                   help="cosine: decay the LR to 0 over the run, once per epoch")
    t.add_argument("--accumulate", type=_positive(int), default=1,
                   help="micro-batches per optimizer step (gradient accumulation)")
    t.add_argument("--clip-grad-norm", type=_positive(float), default=None)
    t.add_argument("--precision", choices=["32", "bf16", "fp16"], default="32",
                   help="autocast precision (fp16 uses a GradScaler, CUDA only)")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--deterministic", action="store_true",
                   help="torch.use_deterministic_algorithms(True) and deterministic cuDNN")
    t.add_argument("--num-workers", type=_non_negative_int, default=0)
    t.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    r = p.add_argument_group("run directory and checkpoints")
    r.add_argument("--run-dir", help="where to write the run (default: runs/<UTC timestamp>)")
    r.add_argument("--monitor", choices=["val_loss", "val_accuracy"], default="val_loss",
                   help="validation metric that picks best.pt")
    r.add_argument("--checkpoint-every-steps", type=_positive(int), default=None,
                   help="also checkpoint every N optimizer steps mid-epoch")
    r.add_argument("--keep-last", type=_non_negative_int, default=0,
                   help="keep the last K step-*.pt checkpoints")
    r.add_argument("--resume", metavar="RUN_DIR",
                   help="continue the run in RUN_DIR from its newest good checkpoint")
    r.add_argument("--force", action="store_true",
                   help="resume even if settings differ from the checkpoint's; without "
                   "--resume, start over in a --run-dir that holds another run (deleting its "
                   "checkpoints)")
    r.add_argument("--progress", choices=["auto", "bar", "plain", "none"], default="auto")
    r.add_argument("--guard", action="store_true",
                   help="also watch the run with trainguard's sanitizer")
    t.add_argument("--sync-batchnorm", action="store_true",
                   help="under torchrun: SyncBatchNorm across ranks (CUDA only)")
    p.set_defaults(func=run, _parser=p)


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(args).items()
            if not k.startswith("_") and k not in {"func", "command"}}


def _merge_resume(args: argparse.Namespace) -> argparse.Namespace:
    """Take the run's settings from its checkpoint; refuse explicit changes unless --force."""
    from trainguard.ckpt.checkpoint import load_checkpoint

    saved = load_checkpoint(args.resume)["config"].get("cli")
    if saved is None:
        raise UsageError(f"{args.resume}: the checkpoint was not written by `trainguard train`; "
                         "resume it from Python with fit(..., resume=...)")
    parser: argparse.ArgumentParser = args._parser
    given = _settings(args)
    changed = {k: v for k, v in given.items()
               if k not in FREE_ON_RESUME and v != parser.get_default(k) and v != saved.get(k)}
    if changed and not args.force:
        listing = "; ".join(f"--{k.replace('_', '-')}: run has {saved.get(k)!r}, given {v!r}"
                            for k, v in sorted(changed.items()))
        raise UsageError(f"{args.resume}: resuming with changed settings would not continue the "
                         f"same run ({listing}); drop them, or pass --force")
    merged = dict(saved)
    merged.update({k: v for k, v in given.items() if k in FREE_ON_RESUME or k in changed})
    merged["run_dir"] = args.resume
    for key in ("image_size", "mean", "std"):
        if merged.get(key) is not None:
            merged[key] = tuple(merged[key])
    out = argparse.Namespace(**merged)
    out._parser = parser
    return out


def run(args: argparse.Namespace) -> int:
    from trainguard.loop.fit import TrainingInterrupted
    from trainguard.loop.train import train_from_args

    if args.resume:
        args = _merge_resume(args)
    try:
        summary = train_from_args(args, _settings(args))
    except TrainingInterrupted as exc:
        from trainguard.loop.distributed import launch_env

        if launch_env()[0] == 0:  # under torchrun, rank 0 speaks for every rank
            print(f"trainguard train: {exc}", file=sys.stderr)
        return 128 + exc.signum
    if summary.get("rank", 0) != 0:  # under torchrun, rank 0 reports for the job
        return 0
    print(f"run directory: {Path(summary['run_dir'])}")
    print(f"best_val_accuracy={summary['best_val_accuracy']:.4f} "
          f"weights_sha256={summary['weights_sha256']}")
    return 0
