"""What ``trainguard train`` runs: build data, loaders, model and optimizer, then ``fit``."""

from __future__ import annotations

import argparse
import json
from typing import Any

import torch

from trainguard.ckpt.seeding import seed_everything
from trainguard.data.build import DataConfig, build_datasets
from trainguard.data.loaders import make_loader
from trainguard.loop.callbacks import EarlyStopping
from trainguard.loop.cliargs import FREE_ON_RESUME
from trainguard.loop.device import resolve_device
from trainguard.loop.distributed import setup as setup_distributed
from trainguard.loop.fit import fit
from trainguard.loop.loggers import check_loggers
from trainguard.loop.plugins import load_callback
from trainguard.loop.rundir import default_run_dir
from trainguard.models import build_model

__all__ = ["train_from_args"]


def _callbacks_and_loggers(args: argparse.Namespace) -> tuple[list[Any], list[str]]:
    """The run's callbacks and loggers, checked before any data is read."""
    callbacks = [load_callback(spec) for spec in args.callback or []]
    if args.patience is not None:
        callbacks.append(EarlyStopping(monitor=args.monitor, patience=args.patience,
                                       min_delta=args.min_delta))
    loggers = ["csv", "tensorboard"] if args.tensorboard else ["csv"]
    check_loggers(loggers)  # no tensorboard package: exit 2 now, not after the data is read
    return callbacks, loggers


def train_from_args(args: argparse.Namespace, settings: dict[str, Any]) -> dict[str, Any]:
    """Train as the CLI asked; returns ``summary.json``'s content plus ``run_dir``.

    Raises:
        UsageError: bad data or arguments (exit 2).
        TrainingInterrupted: SIGINT/SIGTERM after the checkpoint was written.
        CallbackError: a callback raised.
    """
    callbacks, loggers = _callbacks_and_loggers(args)
    ddp = setup_distributed(resolve_device(args.device))  # under torchrun: one shard per rank
    device = ddp.device(resolve_device(args.device))
    data_cfg = DataConfig(
        data=args.data, csv=args.csv, root=args.root, val_csv=args.val_csv,
        val_root=args.val_root, val_fraction=args.val_fraction, channels=args.channels,
        image_size=args.image_size, mean=args.mean, std=args.std, path_column=args.path_column,
        label_column=args.label_column, num_classes=args.num_classes, seed=args.seed)
    train_ds, val_ds = build_datasets(data_cfg)  # every image checked before training starts
    run_dir = args.run_dir = ddp.broadcast(args.run_dir or str(default_run_dir()))
    seed_everything(args.seed)  # before the model is built: its initial weights are seeded too
    model = build_model(args.model, input_shape=train_ds.input_shape,
                        num_classes=train_ds.num_classes)
    pin = device.type == "cuda"
    shard = {"num_replicas": ddp.world_size, "rank": ddp.rank}
    train_loader = make_loader(train_ds, batch_size=args.batch_size, train=True, seed=args.seed,
                               num_workers=args.num_workers, pin_memory=pin, **shard)
    val_loader = make_loader(val_ds, batch_size=max(args.batch_size, 256), train=False,
                             seed=args.seed, num_workers=args.num_workers, pin_memory=pin,
                             **shard)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    scheduler = (torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
                 if args.scheduler == "cosine" else None)
    # what the run is, not where or how it is shown: compared on --resume
    config = {"cli": {k: v for k, v in settings.items() if k not in FREE_ON_RESUME},
              "data_signature": train_ds.signature(), "val_signature": val_ds.signature()}
    history = fit(
        model, train_loader, val_loader, optimizer, torch.nn.CrossEntropyLoss(),
        epochs=args.epochs, device=device, scheduler=scheduler,
        clip_grad_norm=args.clip_grad_norm, accumulate_grad_batches=args.accumulate,
        precision=args.precision, seed=args.seed, deterministic=args.deterministic,
        run_dir=run_dir, monitor=args.monitor,
        checkpoint_every_steps=args.checkpoint_every_steps, keep_last=args.keep_last,
        resume=args.resume, force=args.force, progress=args.progress,
        log_every_steps=args.log_every_steps, handle_signals=True, guard=args.guard,
        config=config, sync_batchnorm=args.sync_batchnorm, callbacks=callbacks,
        loggers=loggers, compile=args.compile)
    if not ddp.is_main:  # rank 0 alone writes (and reads back) the run directory
        return {"run_dir": run_dir, "rank": ddp.rank, "weights_sha256": history.weights_sha256}
    with open(f"{run_dir}/summary.json", encoding="utf-8") as fh:
        summary = json.load(fh)
    summary["run_dir"] = run_dir
    return summary
