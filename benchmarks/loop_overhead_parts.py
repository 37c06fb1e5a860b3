"""Where a ``fit`` epoch's extra cost over a careful hand-written loop comes from, measured part by
part inside one process, so that load from other processes hits both sides alike.

1. The training pass: ``trainguard.loop.step.run_epoch`` (no validation) against the hand loop's
   pass (``zero_grad(set_to_none=True)``, forward, loss, backward, step, detached loss sum) over
   the same digits batches, epochs alternating between the two.
2. Validation: ``trainguard.loop.validation.validation_sums`` under ``eval()`` and ``no_grad``
   with the means read once, against the hand loop's pass summing loss and correct predictions.
3. The end of an epoch: what ``fit`` writes (its ``metrics.csv`` row, two ``train.log`` lines,
   ``last.pt`` with RNG states and history, ``best.pt``, one folder fsync) against the hand
   loop's durable save of model, optimizer, scheduler and epoch plus a CSV row, alternating.

Prints the median of each side (wall and CPU time) and their difference per epoch, next to the
hand-written epoch it adds to (``benchmarks/loop_overhead.py`` measures whole epochs).

    python benchmarks/loop_overhead_parts.py [--epochs 30] [--models cnn mlp]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))

from loop_overhead import _save_durably  # noqa: E402  (the hand loop's own save)
from trainguard.data.build import DataConfig, build_datasets  # noqa: E402
from trainguard.data.loaders import make_loader  # noqa: E402
from trainguard.loop.ddp import SINGLE  # noqa: E402
from trainguard.loop.loggers import make_loggers  # noqa: E402
from trainguard.loop.options import FitOptions  # noqa: E402
from trainguard.loop.setup import build_loop  # noqa: E402
from trainguard.loop.signals import Signals  # noqa: E402
from trainguard.loop.step import run_epoch  # noqa: E402
from trainguard.loop.validation import validation_sums  # noqa: E402
from trainguard.models import build_model  # noqa: E402


def _pair(name: str, train, run_dir: Path):
    """The same model twice: one for the hand loop, one inside a fit Loop."""
    torch.manual_seed(0)
    models = [build_model(name, input_shape=train.input_shape, num_classes=10) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    opts = [torch.optim.AdamW(m.parameters(), lr=3e-3) for m in models]
    scheds = [torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=100) for o in opts]
    loaders = [make_loader(train, batch_size=32, train=True, seed=0) for _ in range(2)]
    loop = build_loop(models[1], loaders[1], None, opts[1], nn.CrossEntropyLoss(),
                      FitOptions(device="cpu", progress="none", run_dir=run_dir,
                                 scheduler=scheds[1]), SINGLE, torch.device("cpu"))
    loop.signals, loop.logs_steps = Signals(False), False
    loop.loggers = make_loggers(["csv"], loop.run_dir, resumed_step=None)
    return models[0], opts[0], scheds[0], loaders[0], loop


def _alternate(parts: dict, epochs: int) -> dict[str, dict[str, list[float]]]:
    out = {k: {"wall": [], "cpu": []} for k in parts}
    items = list(parts.items())
    for e in range(epochs):
        for label, fn in (items if e % 2 else items[::-1]):
            wall, cpu = time.perf_counter(), time.process_time()
            fn(e)
            out[label]["wall"].append(time.perf_counter() - wall)
            out[label]["cpu"].append(time.process_time() - cpu)
    return {k: {c: v[2:] for c, v in d.items()} for k, d in out.items()}  # 2 warm-up epochs


def measure(name: str, epochs: int, data, folder: Path) -> None:
    train, val = data
    val_loader = make_loader(val, batch_size=256, train=False, seed=0)
    model, opt, sched, loader, loop = _pair(name, train, folder / f"{name}-fit")
    hand_dir = folder / f"{name}-hand"
    hand_dir.mkdir()
    loss_fn = nn.CrossEntropyLoss()

    def hand_pass(e: int) -> None:
        loader.batch_sampler.set_epoch(e)
        model.train()
        total, n = torch.zeros(()), 0
        for x, y in loader:
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            total += loss.detach() * len(y)
            n += len(y)

    def fit_pass(e: int) -> None:
        loop.state.epoch, loop.state.batches_done = e, 0
        loop.state.start_epoch(3e-3)
        run_epoch(loop)

    def hand_val(e: int) -> None:
        model.eval()
        vloss, correct, seen = torch.zeros(()), torch.zeros(()), 0
        with torch.no_grad():
            for x, y in val_loader:
                logits = model(x)
                vloss += loss_fn(logits, y) * len(y)
                correct += (logits.argmax(1) == y).sum()
                seen += len(y)
        vloss.item(), correct.item()
        model.train()

    def fit_val(e: int) -> None:
        loop.model.eval()
        with torch.no_grad():
            sums = validation_sums(loop.eval_forward, val_loader, loss_fn, device=loop.device,
                                   metrics={}, precision="32")
        loop.model.train()
        loop.dist.reduce_means(sums, loop.device)

    def hand_end(e: int) -> None:
        _save_durably({"model": model.state_dict(), "optimizer": opt.state_dict(),
                       "scheduler": sched.state_dict(), "epoch": e + 1}, hand_dir / "last.pt")
        with open(hand_dir / "metrics.csv", "a") as fh:
            fh.write(f"{e + 1},0.5,0.4,0.9\n")

    def fit_end(e: int) -> None:
        row = {"epoch": e + 1, "train_loss": 0.5, "val_loss": 0.4, "val_accuracy": 0.9,
               "lr": 3e-3, "elapsed_s": 1.0}
        loop.state.history.rows.append(row)
        for logger in loop.loggers:
            logger.log_epoch(loop.state.step, row, loop.state.history.rows)
        loop.run_dir.log("epoch " + " ".join(f"{k}={v:.6g}" for k, v in row.items()))
        loop.state.end_epoch()
        loop.save("epoch", is_best=True)

    for title, parts in (("training pass", {"hand": hand_pass, "fit": fit_pass}),
                         ("validation", {"hand": hand_val, "fit": fit_val}),
                         ("end of epoch", {"hand": hand_end, "fit": fit_end})):
        res = _alternate(parts, epochs)
        shown = []
        for clock in ("wall", "cpu"):
            h, f = (statistics.median(res[k][clock]) * 1000 for k in ("hand", "fit"))
            shown.append(f"{clock}: hand {h:.2f} ms, fit {f:.2f} ms, fit - hand {f - h:+.2f} ms")
        print(f"{name} {title}: " + "; ".join(shown), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--models", nargs="+", default=["cnn", "mlp"])
    args = ap.parse_args()
    torch.set_num_threads(1)
    data = build_datasets(DataConfig(seed=0))
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            measure(name, args.epochs, data, Path(tmp))


if __name__ == "__main__":
    main()
