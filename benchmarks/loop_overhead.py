"""Steady-state cost of a ``trainguard.fit`` epoch against a careful hand-written loop.

Both train the same model (the digits CNN, ``--model cnn``, or the MLP, ``--model mlp``) on the
digits as ``trainguard train`` splits them (1,437 training images, 360 validation images, batch
32: 45 optimizer steps per epoch), with AdamW and a per-epoch cosine schedule, from the same
seed, through the same loaders, and validate after each epoch. The hand-written loop is the
careful one: ``zero_grad(set_to_none=True)``, the loss summed as a detached device tensor (no
``.item()`` per step), validation in ``eval()`` under ``no_grad`` summing loss and correct
predictions on the device, and after each epoch a checkpoint (model, optimizer, scheduler, epoch)
written durably: ``torch.save`` to a temporary file, flush, ``fsync``, ``os.replace``, ``fsync`` of
the folder; plus a row appended to a CSV. ``fit`` writes its whole run directory each epoch
(``last.pt`` with RNG states and history, ``best.pt``, ``metrics.csv``, ``train.log``) and, once
per run, ``summary.json``, ``curves.png`` and the weights' fingerprint.

Set-up and the one-time work are taken out by differencing: each loop runs ``--short`` and
``--long`` epochs, and an epoch's steady-state cost is ``(T_long - T_short) / (long - short)``,
taken from the medians of the rounds (and, as a check less sensitive to other processes on a
shared machine, from their minima). Drawing ``curves.png`` is not quite a one-time cost: its
tick labels grow with the epochs drawn (307 ms for 2 epochs, 384 ms for 8, measured here), which
differencing would charge to fit's epochs, so fit's plot time is also measured and a second
estimate subtracts it. A third estimate times each whole epoch of the long runs
from its start to the next epoch's start (epochs 2 to long-1: no set-up, no warm-up, no final
plot) and takes the median over all of them, which a burst of load on a shared machine moves
least. Rounds alternate which loop and which length goes first; torch uses one thread. Prints,
per model, the three estimates, each round's own ratio and the fsyncs per epoch.

    python benchmarks/loop_overhead.py [--rounds 9] [--short 2] [--long 8] [--models cnn mlp]
        [--clock wall|cpu]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

import trainguard
from trainguard.data.build import DataConfig, build_datasets
from trainguard.data.loaders import make_loader
from trainguard.loop.rundir import RunDir
from trainguard.models import build_model

FSYNCS = [0]
_fsync = os.fsync


def _counted_fsync(fd: int) -> None:
    FSYNCS[0] += 1
    _fsync(fd)


os.fsync = _counted_fsync  # both loops' fsyncs (files and folders) are counted per epoch

# wall: what a user waits (fsync waits included); cpu: this process's CPU time, which other
# processes on a shared machine disturb less (but which leaves out waiting for the disk)
CLOCK = [time.perf_counter]


def _setup(name: str, epochs: int, data):
    train, val = data
    torch.manual_seed(0)
    model = build_model(name, input_shape=train.input_shape, num_classes=train.num_classes)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    return (model, opt, sched, make_loader(train, batch_size=32, train=True, seed=0),
            make_loader(val, batch_size=256, train=False, seed=0))


def _save_durably(payload: dict, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        torch.save(payload, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


STARTS: list[float] = []  # the clock at each epoch's start, for the third estimate
PLOT_S = [0.0]  # seconds fit spent drawing curves.png
_plot = RunDir.plot


def _timed_plot(self, rows):
    t0 = CLOCK[0]()
    try:
        return _plot(self, rows)
    finally:
        PLOT_S[0] += CLOCK[0]() - t0


RunDir.plot = _timed_plot


class EpochStarts:
    """Notes when each of fit's epochs starts (a callback without per-step hooks: free)."""

    def on_epoch_start(self, state) -> None:
        STARTS.append(CLOCK[0]())


def hand(name: str, epochs: int, data, out: Path) -> float:
    """The careful hand-written loop; returns its wall time in seconds."""
    model, opt, sched, loader, val_loader = _setup(name, epochs, data)
    loss_fn = nn.CrossEntropyLoss()
    t0 = CLOCK[0]()
    for epoch in range(epochs):
        STARTS.append(CLOCK[0]())
        loader.batch_sampler.set_epoch(epoch)
        model.train()
        total, n = torch.zeros(()), 0
        for x, y in loader:
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            total += loss.detach() * len(y)
            n += len(y)
        model.eval()
        vloss, correct, seen = torch.zeros(()), torch.zeros(()), 0
        with torch.no_grad():
            for x, y in val_loader:
                logits = model(x)
                vloss += loss_fn(logits, y) * len(y)
                correct += (logits.argmax(1) == y).sum()
                seen += len(y)
        sched.step()
        _save_durably({"model": model.state_dict(), "optimizer": opt.state_dict(),
                       "scheduler": sched.state_dict(), "epoch": epoch + 1}, out / "last.pt")
        with open(out / "metrics.csv", "a") as fh:
            fh.write(f"{epoch + 1},{total.item() / n},{vloss.item() / seen},"
                     f"{correct.item() / seen}\n")
    return CLOCK[0]() - t0


def with_fit(name: str, epochs: int, data, out: Path) -> float:
    """``trainguard.fit`` with a run directory; returns its wall time in seconds."""
    model, opt, sched, loader, val_loader = _setup(name, epochs, data)
    t0 = CLOCK[0]()
    trainguard.fit(model, loader, val_loader, opt, nn.CrossEntropyLoss(), epochs=epochs,
                   scheduler=sched, device="cpu", run_dir=out, progress="none",
                   callbacks=[EpochStarts()])
    return CLOCK[0]() - t0


def measure(name: str, rounds: int, short: int, long: int, data) -> dict[str, dict]:
    """Wall (or CPU) seconds of every run: ``{loop: {epochs: [seconds per round]}}``, and
    ``{loop: {"fsyncs": {epochs: count}}}``."""
    seconds: dict[str, dict] = {"hand": {short: [], long: [], "fsyncs": {}, "epochs": []},
                                "fit": {short: [], long: [], "fsyncs": {}, "epochs": []}}
    loops = [("hand", hand), ("fit", with_fit)]
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds + 1):
            for label, fn in (loops if r % 2 == 0 else loops[::-1]):
                for epochs in ((short, long) if r % 4 < 2 else (long, short)):
                    out = Path(tmp) / f"{name}-{label}-{r}-{epochs}"
                    out.mkdir()
                    before = FSYNCS[0]
                    STARTS.clear()
                    PLOT_S[0] = 0.0
                    took = fn(name, epochs, data, out)
                    if r:
                        seconds[label].setdefault(("no plot", epochs), []).append(
                            took - PLOT_S[0])
                    seconds[label]["fsyncs"][epochs] = FSYNCS[0] - before
                    if r and epochs == long:  # whole epochs 2 .. long-1, start to start
                        seconds[label]["epochs"] += [b - a for a, b in zip(STARTS[1:],
                                                                           STARTS[2:])]
                    if r:  # round 0 warms up
                        seconds[label][epochs].append(took)
    return seconds


def per_epoch(runs: dict[int, list[float]], short: int, long: int, pick) -> float:
    return (pick(runs[long]) - pick(runs[short])) / (long - short)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--short", type=int, default=2)
    ap.add_argument("--long", type=int, default=8)
    ap.add_argument("--models", nargs="+", default=["cnn", "mlp"])
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    args = ap.parse_args()
    CLOCK[0] = time.perf_counter if args.clock == "wall" else time.process_time
    torch.set_num_threads(1)
    data = build_datasets(DataConfig(seed=0))
    print(f"rounds: {args.rounds} (after 1 warm-up), epochs: {args.long} - {args.short}, "
          f"steps/epoch: 45, torch threads: 1, clock: {args.clock}")
    for name in args.models:
        runs = measure(name, args.rounds, args.short, args.long, data)
        lines = []
        for label, pick in (("medians", statistics.median), ("minima", min)):
            hand_s = per_epoch(runs["hand"], args.short, args.long, pick)
            fit_s = per_epoch(runs["fit"], args.short, args.long, pick)
            lines.append(f"from {label}: hand {hand_s * 1000:.1f} ms/epoch, fit "
                         f"{fit_s * 1000:.1f} ms/epoch, ratio fit/hand {fit_s / hand_s:.3f}")
        rounds = [((fl - fs) / (hl - hs)) for fl, fs, hl, hs in zip(
            runs["fit"][args.long], runs["fit"][args.short], runs["hand"][args.long],
            runs["hand"][args.short])]
        hand_s = per_epoch(runs["hand"], args.short, args.long, statistics.median)
        fit_s = per_epoch({n: runs["fit"][("no plot", n)] for n in (args.short, args.long)},
                          args.short, args.long, statistics.median)
        lines.append(f"from medians, fit's plot time subtracted: fit {fit_s * 1000:.1f} "
                     f"ms/epoch, ratio fit/hand {fit_s / hand_s:.3f}")
        hand_e, fit_e = (statistics.median(runs[k]["epochs"]) for k in ("hand", "fit"))
        lines.append(f"median epoch (start to start): hand {hand_e * 1000:.1f} ms, fit "
                     f"{fit_e * 1000:.1f} ms, ratio fit/hand {fit_e / hand_e:.3f}")
        fsyncs = {label: (runs[label]["fsyncs"][args.long] - runs[label]["fsyncs"][args.short])
                  / (args.long - args.short) for label in ("hand", "fit")}
        print(f"{name}: " + "; ".join(lines) + "; per round: "
              + " ".join(f"{r:.3f}" for r in rounds)
              + f"; fsyncs per epoch: hand {fsyncs['hand']:g}, fit {fsyncs['fit']:g}", flush=True)


if __name__ == "__main__":
    main()
