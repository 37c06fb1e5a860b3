"""What the runtime sanitizer costs per training step, against PyTorch's anomaly mode.

The same training step (zero_grad, forward, ``F.cross_entropy``, backward, ``optimizer.step()``)
runs in blocks, alternating plain / watched (and plain / anomaly mode), with the order flipped every
round so drift in machine speed hits both sides equally. Each round gives one paired ratio
(watched ms/step divided by plain ms/step of the same round) and one paired difference; the script
prints the median ratio and its spread (25th-75th percentile), the median added microseconds per
step, and the median ms/step of each side. One watcher serves the whole run (started and stopped
around each watched block, outside the timing), as in a real run: after its first 8 steps the loop
is settled, so the watched steps are settled ones with one in 16 checked in full (one in 32 after
8 clean samples in a row), in the proportion a long run has (``--every-step`` measures every step
checked in full instead).

Models (inputs: the 8x8 digits of ``sklearn.datasets.load_digits``, scaled to [0, 1]):

- ``cnn``: Conv2d(1, 16, 3) - ReLU - Conv2d(16, 32, 3) - ReLU - Flatten - Linear(512, 10),
  batch 64, input (64, 1, 8, 8);
- ``mlp``: Linear(64, 32) - ReLU - Linear(32, 10), batch 32, input (32, 64).

``--script-lines N`` runs the same steps as the module-level code of a generated script of about
``N`` lines (a training loop written at the top level of a file, as many scripts are), instead of
inside a function: the hooks then see the script's module code as the caller of every call.

Usage::

    python benchmarks/sanitizer_overhead.py                 # both models, 1 thread, 100 rounds
    python benchmarks/sanitizer_overhead.py --rounds 80 --steps 25 --threads 1 --json out.json
    python benchmarks/sanitizer_overhead.py --models cnn --modes sanitizer --script-lines 800
    python benchmarks/sanitizer_overhead.py --count instructions --steps 320
    python benchmarks/sanitizer_overhead.py --count instructions --src OTHER_CHECKOUT/src
    python benchmarks/sanitizer_overhead.py --device cuda --rounds 40

``--count instructions`` runs each side (plain, watched) once under valgrind's callgrind,
instrumented only over ``--steps`` steps of a settled run (after the same warm-up and settling as
the timed blocks; the watcher stays on for all of them, as in a long run), and prints watched /
plain instructions. The count does not depend on what else the machine runs, so two checkouts
can be compared at any time (``--src``: the trainguard sources to measure, default this
checkout's). It counts instructions, not time: a vectorized convolution and a Python bytecode
weigh alike, so its ratio is not the timed ratio; it is the measure of a change between two
versions of the checks. Needs valgrind and a C compiler with valgrind's headers.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

# --src OTHER/src measures another checkout's trainguard with this benchmark (read before import)
_SRC = next((sys.argv[i + 1] for i, a in enumerate(sys.argv[:-1]) if a == "--src"),
            str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, _SRC)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from trainguard.config import Config  # noqa: E402
from trainguard.sanitize.watcher import Watcher  # noqa: E402


def digits() -> tuple[torch.Tensor, torch.Tensor]:
    """The digits images, shape (1797, 1, 8, 8) float32 in [0, 1], and labels (1797,) int64."""
    from sklearn.datasets import load_digits

    data = load_digits()
    x = torch.tensor(data.images, dtype=torch.float32).unsqueeze(1) / 16.0
    return x, torch.tensor(data.target, dtype=torch.int64)


def make(kind: str) -> tuple[nn.Module, int]:
    """The model and its batch size."""
    if kind == "cnn":
        return nn.Sequential(nn.Conv2d(1, 16, 3), nn.ReLU(), nn.Conv2d(16, 32, 3), nn.ReLU(),
                             nn.Flatten(), nn.Linear(32 * 4 * 4, 10)), 64
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)), 32


DEVICE = "cpu"  # --device: where the model and the data live


def _sync() -> None:
    """Wait for the device's queued work (a CUDA step returns before its kernels finish)."""
    if DEVICE.startswith("cuda"):
        torch.cuda.synchronize()


def _setup(kind: str) -> dict:
    """What a step uses: data, model, optimizer, batch size, and ``n`` (the last batch start)."""
    torch.manual_seed(0)
    x, y = digits()
    x, y = x.to(DEVICE), y.to(DEVICE)
    model, batch = make(kind)
    model.to(DEVICE)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return {"F": F, "x": x, "y": y, "model": model, "optimizer": optimizer, "batch": batch,
            "n": x.shape[0] - batch}


def step_fn(kind: str) -> Callable[[int], None]:
    scope = _setup(kind)
    x, y, model, optimizer, batch, n = (scope[k] for k in ("x", "y", "model", "optimizer",
                                                           "batch", "n"))

    def step(i: int) -> None:
        start = (i * batch) % n
        xb, yb = x[start:start + batch], y[start:start + batch]
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        optimizer.step()

    return step


_SCRIPT_STEP = """\
for i in range(offset, offset + steps):
    start = (i * batch) % n
    xb, yb = x[start:start + batch], y[start:start + batch]
    optimizer.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(xb), yb)
    loss.backward()
    optimizer.step()
"""


def script_fn(kind: str, lines: int) -> Callable[[int, int], None]:
    """``run(offset, steps)``: the steps of :func:`step_fn` as the module-level code of a script of
    about ``lines`` lines (helper functions first, never called, then the loop)."""
    helpers = "".join(f"    def helper_{k}(value, scale={k}):\n        shifted = value * scale + 1\n"
                      f"        return shifted - scale\n\n" for k in range(max(0, lines - 10) // 4))
    source = f"def _helpers():\n{helpers}    return None\n\n\n" + _SCRIPT_STEP
    code = compile(source, str(Path(__file__).with_name("train_script.py")), "exec")
    scope = _setup(kind)

    def run(offset: int, steps: int) -> None:
        scope["offset"], scope["steps"] = offset, steps
        exec(code, scope)

    return run


def _block(step: Callable[[int], None], steps: int, offset: int,
           clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds per step over ``steps`` steps, after one untimed step (the first step after the
    watcher starts sets up what a real run sets up once: sampled parameters, their hooks). The
    untimed step is made from the same line as the timed ones: a model call's cadence key names
    the line that called the step function, so a first step called from another line would
    start every block with calls that differ from the settled cycle, as no real loop does."""
    t0 = 0.0
    for i in range(steps + 1):
        if i == 1:
            _sync()
            t0 = clock()
        step(offset + i)
    _sync()
    return (clock() - t0) / steps


def _script_block(run: Callable[[int, int], None], steps: int, offset: int,
                  clock: Callable[[], float] = time.perf_counter) -> float:
    """:func:`_block` for a script's module-level loop."""
    run(offset, 1)
    _sync()
    t0 = clock()
    run(offset, steps)
    _sync()
    return (clock() - t0) / steps


def measure(kind: str, mode: str, *, rounds: int, steps: int,
            clock: Callable[[], float] = time.perf_counter,
            every_step: bool = False, script_lines: int = 0) -> dict[str, float]:
    """Paired ratios of ``mode`` ("sanitizer" or "anomaly") against plain steps; with
    ``script_lines``, the steps run as a script's module-level loop (:func:`script_fn`)."""
    if script_lines:
        block: Callable[..., float] = _script_block
        timed: Callable[..., None] = script_fn(kind, script_lines)
    else:
        block = _block
        timed = step_fn(kind)
    block(timed, steps * 2, 0, clock)  # warm-up: allocator, kernels, first-call caches
    # One watcher for the whole run, as in a real one: started and stopped around each watched
    # block (outside the timing), so per-step cost is measured, not the first steps' set-up.
    watcher = Watcher(config=Config(), stream=None, every_step=every_step)
    if mode == "sanitizer":
        watcher.start()
        block(timed, steps * 2, 0, clock)  # the loop settles, from the timed blocks' own lines
        watcher.stop()
    plain, other, ratios, added = [], [], [], []
    for r in range(rounds):
        results = {}
        for side in (("plain", mode) if r % 2 == 0 else (mode, "plain")):
            if side == "plain":
                results[side] = block(timed, steps, r * steps, clock)
            elif mode == "sanitizer":
                watcher.start()
                try:
                    results[side] = block(timed, steps, r * steps, clock)
                finally:
                    watcher.stop()
                if watcher.findings:
                    raise SystemExit(f"the benchmark step itself has findings: {watcher.findings}")
            else:
                with torch.autograd.set_detect_anomaly(True):
                    results[side] = block(timed, steps, r * steps, clock)
        plain.append(results["plain"])
        other.append(results[mode])
        ratios.append(results[mode] / results["plain"])
        added.append(results[mode] - results["plain"])
    q = statistics.quantiles(ratios, n=4)
    return {"model": kind, "mode": mode, "plain_ms": statistics.median(plain) * 1e3,
            "other_ms": statistics.median(other) * 1e3, "ratio": statistics.median(ratios),
            "ratio_p25": q[0], "ratio_p75": q[2], "added_us": statistics.median(added) * 1e6,
            "rounds": rounds, "steps": steps, "script_lines": script_lines}


def counted_side(kind: str, side: str, steps: int) -> None:
    """The child of ``--count instructions``: warm up and settle as :func:`measure` does, then
    run ``steps`` steps (watched when ``side`` is "sanitizer") with callgrind's instrumentation
    on (``TRAINGUARD_CALLGRIND_LIB``: the library whose ``tg_instrument(int)`` switches it)."""
    import ctypes

    instrument = ctypes.CDLL(os.environ["TRAINGUARD_CALLGRIND_LIB"]).tg_instrument
    timed = step_fn(kind)
    _block(timed, 64, 0)
    watcher = Watcher(config=Config(), stream=None)
    if side == "sanitizer":
        watcher.start()
        _block(timed, 64, 0)  # settled: the timed steps are a long run's steady state
    # Both sides enter the counted window with the collector's counts at zero: otherwise whether
    # a generation-2 pass falls inside a short window depends on what the warm-up allocated,
    # not on the steps counted (one pass moves a 64-step MLP count by about 2%). Passes the
    # counted steps trigger themselves still count.
    gc.collect()
    instrument(1)
    for i in range(steps):
        timed(64 + i)
    instrument(0)
    if side == "sanitizer":
        watcher.stop()
        if watcher.findings:
            raise SystemExit(f"the benchmark step itself has findings: {watcher.findings}")


def count_instructions(models: list[str], steps: int, src: str) -> list[dict]:
    """Watched / plain instructions of ``steps`` settled steps per model, each side once under
    callgrind in a fresh process."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from integrations_overhead import callgrind_argv, callgrind_library, callgrind_total

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        library = callgrind_library(tmp)
        env = dict(os.environ, TRAINGUARD_CALLGRIND_LIB=library, PYTHONHASHSEED="0",
                   OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        for kind in models:
            counts = {}
            for side in ("plain", "sanitizer"):
                out = os.path.join(tmp, f"{kind}-{side}.callgrind.out")
                r = subprocess.run(callgrind_argv(out) + [
                                   sys.executable, __file__, "--src", src,
                                   "--counted-side", f"{kind}:{side}", "--steps", str(steps)],
                                   env=env, capture_output=True, text=True)
                total = callgrind_total(out)
                if r.returncode != 0 or total is None:
                    raise SystemExit(f"{kind} {side}: no count (exit {r.returncode})\n"
                                     f"{r.stderr[-2000:]}")
                counts[side] = total
            rows.append({"model": kind, "steps": steps, "src": src,
                         "plain_instructions": counts["plain"],
                         "watched_instructions": counts["sanitizer"],
                         "ratio": counts["sanitizer"] / counts["plain"],
                         "added_per_step": (counts["sanitizer"] - counts["plain"]) / steps})
            row = rows[-1]
            print(f"{kind:5} {row['plain_instructions']:>15,} {row['watched_instructions']:>15,} "
                  f"{row['ratio']:7.4f} {row['added_per_step']:>12,.0f}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="cnn,mlp", help="comma-separated: cnn, mlp")
    parser.add_argument("--modes", default="sanitizer,anomaly",
                        help="comma-separated: sanitizer, anomaly")
    parser.add_argument("--rounds", type=int, default=100, help="alternations (default 100)")
    parser.add_argument("--steps", type=int, default=10, help="steps per block (default 10)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="wall: time.perf_counter (default); cpu: time.process_time, the "
                             "process's own CPU time, steadier on a machine other jobs share")
    parser.add_argument("--every-step", action="store_true",
                        help="check every step in full (no settled steps)")
    parser.add_argument("--script-lines", type=int, default=0, metavar="N",
                        help="run the steps as the module-level loop of a generated script of "
                             "about N lines (default 0: the steps run inside a function)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--count", choices=("time", "instructions"), default="time",
                        help="time rounds (default), or count instructions under callgrind")
    parser.add_argument("--src", default=_SRC,
                        help="the trainguard sources to measure (default: this checkout's src)")
    parser.add_argument("--device", default="cpu",
                        help="where the model and data live: cpu (default) or cuda; timed "
                             "blocks wait for the device's queued work before reading the clock")
    parser.add_argument("--counted-side", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    global DEVICE
    DEVICE = args.device
    torch.set_num_threads(args.threads)
    if args.counted_side:
        kind, side = args.counted_side.split(":")
        counted_side(kind, side, args.steps)
        return 0
    if args.count == "instructions":
        print(f"torch {torch.__version__}, trainguard from {args.src}, {args.steps} settled steps "
              f"per side, instructions under callgrind (one run each)")
        print(f"{'model':5} {'plain':>15} {'watched':>15} {'ratio':>7} {'added/step':>12}")
        rows = count_instructions(args.models.split(","), args.steps, args.src)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
        return 0
    rows = []
    print(f"torch {torch.__version__}, {args.device}, {args.threads} thread(s), "
          f"{args.rounds} rounds x {args.steps} steps per side, {args.clock} clock"
          + (", every step checked" if args.every_step else "")
          + (f", module-level loop of a {args.script_lines}-line script" if args.script_lines
             else ""))
    print(f"{'model':5} {'mode':9} {'plain ms':>9} {'other ms':>9} {'ratio':>6} {'p25-p75':>13} "
          f"{'added us':>9}")
    for kind in args.models.split(","):
        for mode in args.modes.split(","):
            row = measure(kind, mode, rounds=args.rounds, steps=args.steps,
                          clock=time.perf_counter if args.clock == "wall" else time.process_time,
                          every_step=args.every_step, script_lines=args.script_lines)
            row["clock"] = args.clock
            row["every_step"] = args.every_step
            rows.append(row)
            print(f"{kind:5} {mode:9} {row['plain_ms']:9.3f} {row['other_ms']:9.3f} "
                  f"{row['ratio']:6.3f} {row['ratio_p25']:6.3f}-{row['ratio_p75']:6.3f} "
                  f"{row['added_us']:9.1f}",
                  flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
