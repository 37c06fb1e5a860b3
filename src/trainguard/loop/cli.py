"""``trainguard train``: train a model on the bundled digits, a CSV of images or an image folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from trainguard.errors import UsageError
from trainguard.loop.cliargs import (FREE_ON_RESUME, PATH_SETTINGS, HelpFormatter, floats,
                                     non_negative_float, non_negative_int, positive, resolved,
                                     size)

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train", help="train a model with the reference loop",
        description="Train with trainguard's reference loop on the bundled digits (default), a "
        "CSV of image paths and labels, or a folder of class sub-folders. Writes metrics.csv, "
        "curves.png, summary.json, train.log and checkpoints to the run directory.",
        formatter_class=HelpFormatter)
    _data_arguments(p.add_argument_group("data"))
    _training_arguments(p.add_argument_group("training"))
    _run_arguments(p.add_argument_group("run directory, checkpoints and logging"))
    p.set_defaults(func=run, _parser=p)


def _data_arguments(d: Any) -> None:
    d.add_argument("--data", choices=["digits", "csv", "folder"], default="digits",
                   help="digits: scikit-learn's bundled 8x8 handwritten digits (1,797 images); "
                   "csv: --csv and --root; folder: --root with one sub-folder per class")
    d.add_argument("--csv", help="CSV with a header, an image path column and a label column")
    d.add_argument("--root", help="folder the CSV paths are relative to, or the class folders")
    d.add_argument("--val-csv", help="validation CSV (default: split off --val-fraction)")
    d.add_argument("--val-root", help="validation image folder (or root for --val-csv paths)")
    d.add_argument("--val-fraction", type=float, default=0.2,
                   help="seeded stratified validation split when no validation set is given")
    d.add_argument("--channels", type=int, choices=[1, 3], default=1,
                   help="convert images to grey (1) or RGB (3)")
    d.add_argument("--image-size", type=size, default=None,
                   help="resize images to N or HxW pixels (default: keep; all must match)")
    d.add_argument("--mean", type=floats, help="per-channel mean of [0,1] pixels, comma-"
                   "separated (default: computed on the training split)")
    d.add_argument("--std", type=floats, help="per-channel std (default: computed)")
    d.add_argument("--path-column", help="CSV column of image paths (default: path, image, "
                   "file, filename, filepath or image_path)")
    d.add_argument("--label-column", default="label", help="CSV column of integer labels")
    d.add_argument("--num-classes", type=positive(int),
                   help="number of classes (default: largest label + 1)")


def _training_arguments(t: Any) -> None:
    t.add_argument("--model", default="cnn", help="model from the registry: cnn or mlp")
    t.add_argument("--epochs", type=positive(int), default=12, help="epochs in the whole run")
    t.add_argument("--batch-size", type=positive(int), default=32,
                   help="samples per micro-batch (per rank under torchrun)")
    t.add_argument("--lr", type=positive(float), default=3e-3, help="peak learning rate")
    t.add_argument("--weight-decay", type=non_negative_float, default=1e-4,
                   help="AdamW's decoupled weight decay")
    t.add_argument("--scheduler", choices=["cosine", "none"], default="cosine",
                   help="cosine: decay the LR to 0 over the run, once per epoch")
    t.add_argument("--accumulate", type=positive(int), default=1,
                   help="micro-batches per optimizer step (gradient accumulation; under "
                   "torchrun one all-reduce per step)")
    t.add_argument("--clip-grad-norm", type=positive(float), default=None,
                   help="clip the global gradient norm to this value (default: no clipping)")
    t.add_argument("--precision", choices=["32", "bf16", "fp16"], default="32",
                   help="autocast precision (fp16 uses a GradScaler, CUDA only)")
    t.add_argument("--compile", action="store_true",
                   help="run the model through torch.compile (falls back to eager with a "
                   "warning when compiling fails)")
    t.add_argument("--seed", type=int, default=0,
                   help="seeds weights, data order, split and workers: same seed, same weights")
    t.add_argument("--deterministic", action="store_true",
                   help="torch.use_deterministic_algorithms(True) and deterministic cuDNN")
    t.add_argument("--num-workers", type=non_negative_int, default=0,
                   help="DataLoader worker processes (0: load in the main process)")
    t.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    t.add_argument("--sync-batchnorm", action="store_true",
                   help="under torchrun: SyncBatchNorm across ranks (CUDA only)")
    t.add_argument("--patience", type=positive(int), default=None,
                   help="stop early when --monitor has not improved for N epochs "
                   "(default: train every epoch)")
    t.add_argument("--min-delta", type=non_negative_float, default=0.0,
                   help="with --patience: the least change that counts as an improvement")
    t.add_argument("--callback", action="append", metavar="MODULE:NAME", default=None,
                   help="add a callback: NAME in an importable module or a .py file "
                   "(e.g. my_callbacks.py:LogLR), a class built without arguments or a "
                   "function returning the callback; repeatable")


def _run_arguments(r: Any) -> None:
    r.add_argument("--run-dir", help="where to write the run (default: runs/<UTC timestamp>)")
    r.add_argument("--monitor", choices=["val_loss", "val_accuracy"], default="val_loss",
                   help="validation metric that picks best.pt (and that --patience watches)")
    r.add_argument("--checkpoint-every-steps", type=positive(int), default=None,
                   help="also checkpoint every N optimizer steps mid-epoch (default: only at "
                   "the end of each epoch)")
    r.add_argument("--keep-last", type=non_negative_int, default=0,
                   help="keep the last K step-*.pt checkpoints")
    r.add_argument("--resume", metavar="RUN_DIR",
                   help="continue the run in RUN_DIR from its newest good checkpoint")
    r.add_argument("--force", action="store_true",
                   help="resume even if settings differ from the checkpoint's; without "
                   "--resume, start over in a --run-dir that holds another run (deleting its "
                   "checkpoints)")
    r.add_argument("--tensorboard", action="store_true",
                   help="also write TensorBoard event files to RUN_DIR/tensorboard (needs "
                   "pip install 'trainguard[tensorboard]')")
    r.add_argument("--log-every-steps", type=non_negative_int, default=50,
                   help="progress and TensorBoard step values every N optimizer steps (each "
                   "reads the loss: one host sync; 0: never)")
    r.add_argument("--progress", choices=["auto", "bar", "plain", "none"], default="auto",
                   help="auto: a bar on a terminal, plain lines otherwise")
    r.add_argument("--guard", action="store_true",
                   help="also watch the run with trainguard's sanitizer")


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(args).items()
            if not k.startswith("_") and k not in {"func", "command"}}


def _resolve_paths(args: argparse.Namespace) -> None:
    """Store file settings resolved, so that ``--resume`` works from any directory."""
    from trainguard.loop.plugins import resolve_spec

    for key in PATH_SETTINGS:
        setattr(args, key, resolved(getattr(args, key)))
    if args.callback:
        args.callback = [resolve_spec(spec) for spec in args.callback]


def _merge_resume(args: argparse.Namespace) -> tuple[argparse.Namespace, dict[str, Any]]:
    """Take the run's settings from its checkpoint; refuse explicit changes unless --force.

    Returns:
        The merged arguments and the checkpoint.
    """
    from trainguard.ckpt.checkpoint import load_checkpoint

    checkpoint = load_checkpoint(args.resume)
    saved = checkpoint["config"].get("cli")
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
    merged = {k: parser.get_default(k) for k in given}  # settings newer than the run
    merged.update(saved)
    merged.update({k: v for k, v in given.items() if k in FREE_ON_RESUME or k in changed})
    merged["run_dir"] = args.resume
    for key in ("image_size", "mean", "std"):
        if merged.get(key) is not None:
            merged[key] = tuple(merged[key])
    out = argparse.Namespace(**merged)
    out._parser = parser
    return out, checkpoint


def _nothing_left(args: argparse.Namespace, checkpoint: dict[str, Any]) -> str | None:
    """Why a resumed run has nothing left to train, or ``None``."""
    stopped = checkpoint.get("stopped")
    if stopped is not None:
        return f"stopped at epoch {stopped['epoch']} ({stopped['reason']})"
    if int(checkpoint["epoch"]) >= args.epochs:
        return f"complete ({checkpoint['epoch']} of {args.epochs} epochs)"
    return None


def run(args: argparse.Namespace) -> int:
    from trainguard.loop.distributed import launch_env

    main_rank = launch_env()[0] == 0  # under torchrun, rank 0 speaks for every rank
    _resolve_paths(args)
    if args.resume:
        args, checkpoint = _merge_resume(args)
        done = _nothing_left(args, checkpoint)
        if done is not None:
            if main_rank:
                print(f"trainguard train: {args.resume} is {done}, step {checkpoint['step']}; "
                      "nothing to do (more epochs: --epochs N --force)", file=sys.stderr)
            return 0
    return _train(args, main_rank)


def _train(args: argparse.Namespace, main_rank: bool) -> int:
    from trainguard.loop.callbacks import CallbackError
    from trainguard.loop.signals import TrainingInterrupted
    from trainguard.loop.train import train_from_args

    try:
        summary = train_from_args(args, _settings(args))
    except TrainingInterrupted as exc:
        if main_rank:
            print(f"trainguard train: {exc}", file=sys.stderr)
        return 128 + exc.signum
    except CallbackError as exc:
        if main_rank:
            import traceback

            cause = exc.__cause__ or exc
            traceback.print_exception(type(cause), cause, cause.__traceback__)
            print(f"trainguard train: error: {exc}; the run stopped, its last checkpoint stays "
                  f"(resume with: trainguard train --resume {args.run_dir})", file=sys.stderr)
        return 2
    if not main_rank:
        return 0
    print(f"run directory: {Path(summary['run_dir'])}")
    if summary.get("stopped_early"):
        print(f"stopped early at epoch {summary['stopped_epoch']}: {summary['stop_reason']}")
    print(f"best_val_accuracy={summary['best_val_accuracy']:.4f} "
          f"weights_sha256={summary['weights_sha256']}")
    return 0
