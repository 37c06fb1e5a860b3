"""A small Lightning fit, correct unless a fault is named on the command line.

    python lightning_app.py [FAULT] [--watch callback|none] [--strict] [--root DIR]

Faults (each written in a LightningModule hook, the line that causes it marked ``# cause:``):
graph-kept, train-in-eval-hook, scheduler-per-batch, param-after-optimizers, unseeded,
losses-on-self.
"""

import argparse
import ctypes
import os
import resource
import sys
import time

import lightning as L
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FAULTS = ("graph-kept", "train-in-eval-hook", "scheduler-per-batch", "param-after-optimizers",
          "unseeded")


class Classifier(L.LightningModule):
    def __init__(self, fault=None):
        super().__init__()
        self.fault = fault
        self.net = nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.2),
                                 nn.Linear(32, 2))
        self.val_losses = []
        self.epoch_loss = 0.0

    def forward(self, x):
        logits = self.net(x)
        if hasattr(self, "scale"):
            logits = logits * self.scale
        return logits

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        if self.fault == "graph-kept":
            self.epoch_loss += loss  # cause: graph-kept
        self.log("train_loss", loss)
        return loss

    def on_train_epoch_end(self):
        if self.fault == "graph-kept":
            self.log("epoch_loss", self.epoch_loss)
            self.epoch_loss = 0.0

    def on_train_epoch_start(self):
        if self.fault == "param-after-optimizers" and not hasattr(self, "scale"):
            self.scale = nn.Parameter(torch.ones(2))  # cause: param-after-optimizers

    def validation_step(self, batch, batch_idx):
        if self.fault == "train-in-eval-hook":
            self.train()  # cause: train-in-eval-hook
        x, y = batch
        logits = self(x)
        loss = nn.functional.cross_entropy(logits, y)
        self.val_losses.append(loss)
        self.log("val_loss", loss)
        self.log("val_acc", (logits.argmax(1) == y).float().mean())

    def on_validation_epoch_end(self):
        self.log("val_loss_mean", torch.stack(self.val_losses).mean())
        self.val_losses.clear()

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
        if self.fault == "scheduler-per-batch":
            return {"optimizer": optimizer, "lr_scheduler": {
                "scheduler": scheduler,
                "interval": "step",  # cause: scheduler-per-batch
            }}
        return {"optimizer": optimizer,
                "lr_scheduler": {"scheduler": scheduler, "interval": "epoch"}}


class Tiny(Classifier):
    """The Lightning bug of appending each step's loss to ``self``."""

    def __init__(self):
        super().__init__()
        self.train_losses = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.train_losses.append(loss)  # cause: losses-on-self
        return loss


def loaders(n=512, batch_size=16):
    x = torch.randn(n, 8)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    data = TensorDataset(x, y)
    return (DataLoader(data, batch_size=batch_size, shuffle=True, drop_last=True),
            DataLoader(data, batch_size=128))


def fit(fault, args):
    """One fit (for "correct": a fit, then a resume from Lightning's own last.ckpt)."""
    if fault != "unseeded":
        L.seed_everything(0)
    root = f"{args.root}/{fault}"
    callbacks = []
    if args.watch == "callback":
        from trainguard.integrations.lightning import TrainguardCallback

        report = f"{args.report_dir}/{fault}.json" if args.report_dir else None
        callbacks.append(TrainguardCallback(strict=args.strict, report=report))
    callbacks.append(L.pytorch.callbacks.ModelCheckpoint(dirpath=f"{root}/ckpt", monitor="val_loss",
                                                         save_last=True))
    trainer = L.Trainer(
        max_epochs=args.epochs, accumulate_grad_batches=2, precision="bf16-mixed",
        deterministic=True, callbacks=callbacks, default_root_dir=root,
        logger=L.pytorch.loggers.CSVLogger(root), enable_progress_bar=False,
        enable_model_summary=False, num_sanity_val_steps=0, limit_train_batches=args.batches)
    model = Tiny() if fault == "losses-on-self" else Classifier(
        None if fault == "correct" else fault)
    train, val = loaders(args.samples)
    start, cpu = time.perf_counter(), _cpu_s()
    _instrumented(True)
    trainer.fit(model, train, val)  # cause: unseeded
    _instrumented(False)
    print(f"{fault}: fit_s {time.perf_counter() - start:.3f}, {trainer.global_step} optimizer "
          f"steps, cpu_s {_cpu_s() - cpu:.3f}")
    if fault == "correct" and args.resume:  # resume from Lightning's own checkpoint, one more epoch
        trainer = L.Trainer(
            max_epochs=args.epochs + 1, accumulate_grad_batches=2, precision="bf16-mixed",
            deterministic=True, callbacks=callbacks[:-1], default_root_dir=root, logger=False,
            enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False,
            num_sanity_val_steps=0, limit_train_batches=args.batches)
        trainer.fit(Classifier(), train, val, ckpt_path=f"{root}/ckpt/last.ckpt")
    np.random.rand()  # (numpy, seeded by seed_everything, is drawn from too)


def _instrumented(on):
    """Turn callgrind's instrumentation on or off (around the timed part) when
    benchmarks/integrations_overhead.py --count instructions runs this script under callgrind:
    TRAINGUARD_CALLGRIND_LIB names a library whose tg_instrument(int) issues the request.
    Otherwise nothing."""
    lib = os.environ.get("TRAINGUARD_CALLGRIND_LIB")
    if lib:
        ctypes.CDLL(lib).tg_instrument(int(on))


def _cpu_s():
    """CPU seconds this process and its waited-for children (DataLoader workers) have used so
    far (user + system, all threads)."""
    own, children = (resource.getrusage(who)
                     for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("faults", nargs="*", default=["correct"],
                        choices=("correct",) + FAULTS + ("losses-on-self",))
    parser.add_argument("--watch", choices=("callback", "none"), default="callback")
    parser.add_argument("--strict", action="store_true")
    parser.add_argument("--root", default="lightning_out")
    parser.add_argument("--report-dir", help="write each fit's findings to DIR/FAULT.json")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=512)
    parser.add_argument("--batches", type=int, default=None, help="limit_train_batches")
    parser.add_argument("--no-resume", dest="resume", action="store_false",
                        help="skip the resume from last.ckpt after the correct fit")
    args = parser.parse_args(argv)
    if "unseeded" in args.faults and len(args.faults) > 1:
        parser.error("run unseeded alone: the other fits seed the process")
    for fault in args.faults:
        fit(fault, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
