"""Per-step overhead of ``trainguard.fit`` against a plain hand-written loop.

Both train the same tiny MLP (64-32-10) on the same digits batches (batch 32, the 1,797 digits
repeated 5 times: 281 steps per epoch), from the same seed, for one epoch followed by one
validation pass, and write the epoch's files: the plain loop ``torch.save``s a checkpoint
(model + optimizer) and appends a CSV row; ``fit`` writes its run directory (``last.pt`` and
``best.pt`` written atomically with fsync, ``metrics.csv``, ``train.log``, ``summary.json``;
``curves.png`` is drawn once per run, not per epoch, and is left out here with ``plot=False``).

Rounds alternate which loop goes first; torch uses one thread. Prints the median ms/step of each
and the median of the paired ratios fit/plain with its interquartile range.

    python benchmarks/loop_overhead.py [--rounds 21]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

import trainguard
from trainguard.data.dataset import ImageTensorDataset
from trainguard.data.digits import load_digits_dataset
from trainguard.data.loaders import make_loader
from trainguard.models import MLP


def _data() -> tuple[ImageTensorDataset, ImageTensorDataset]:
    full = load_digits_dataset()
    rep = torch.arange(len(full)).repeat(5)
    train = full.subset(rep)
    return train, full.subset(torch.arange(360))


def _setup(train, val):
    torch.manual_seed(0)
    model = MLP(64, 10, hidden=32)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    return (model, opt, make_loader(train, batch_size=32, train=True, seed=0),
            make_loader(val, batch_size=256, train=False, seed=0))


def plain(train, val, out: Path) -> tuple[float, int]:
    model, opt, loader, val_loader = _setup(train, val)
    crit = nn.CrossEntropyLoss()
    t0 = time.perf_counter()
    loader.batch_sampler.set_epoch(0)
    model.train()
    total, n = 0.0, 0
    for x, y in loader:
        opt.zero_grad(set_to_none=True)
        loss = crit(model(x), y)
        loss.backward()
        opt.step()
        total += loss.item() * len(y)
        n += len(y)
    model.eval()
    correct = 0
    vloss = 0.0
    with torch.no_grad():
        for x, y in val_loader:
            out_ = model(x)
            vloss += crit(out_, y).item() * len(y)
            correct += (out_.argmax(1) == y).sum().item()
    model.train()
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, out / "ckpt.pt")
    with open(out / "metrics.csv", "a") as fh:
        fh.write(f"1,{total / n},{vloss / len(val_loader.dataset)},{correct},0.001\n")
    return time.perf_counter() - t0, len(loader)


def guarded(train, val, out: Path) -> tuple[float, int]:
    model, opt, loader, val_loader = _setup(train, val)
    t0 = time.perf_counter()
    trainguard.fit(model, loader, val_loader, opt, nn.CrossEntropyLoss(), epochs=1,
                   device="cpu", run_dir=out, progress="none", plot=False)
    return time.perf_counter() - t0, len(loader)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=21)
    args = ap.parse_args()
    torch.set_num_threads(1)
    train, val = _data()
    plain_ms, fit_ms, ratios = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds + 1):
            order = [("plain", plain), ("fit", guarded)]
            if r % 2:
                order.reverse()
            times = {}
            for name, fn in order:
                out = Path(tmp) / f"{name}-{r}"
                out.mkdir()
                seconds, steps = fn(train, val, out)
                times[name] = seconds * 1000 / steps
            if r == 0:
                continue  # warm-up round
            plain_ms.append(times["plain"])
            fit_ms.append(times["fit"])
            ratios.append(times["fit"] / times["plain"])
    q = statistics.quantiles(ratios, n=4)
    print(f"rounds: {args.rounds} (after 1 warm-up), steps/epoch: {steps}, torch threads: 1")
    print(f"plain loop: median {statistics.median(plain_ms):.3f} ms/step")
    print(f"trainguard.fit: median {statistics.median(fit_ms):.3f} ms/step")
    print(f"ratio fit/plain: median {statistics.median(ratios):.3f} "
          f"(IQR {q[0]:.3f}-{q[2]:.3f}, min {min(ratios):.3f}, max {max(ratios):.3f})")


if __name__ == "__main__":
    main()
