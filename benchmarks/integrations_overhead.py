"""What watching a Lightning or Hugging Face Trainer run costs: plain, through the trainer
callback, and under ``trainguard run``.

    python benchmarks/integrations_overhead.py [--rounds 3] [--only lightning,hf,losses]

Each round runs the three variants of each case one after the other (interleaved, so that a
noisy machine weighs on all alike), each in a fresh process:

- ``lightning``: tests/integrations/scripts/lightning_app.py, 7 epochs of 16 optimizer steps
  (112 steps; bf16-mixed, accumulate_grad_batches=2, validation and checkpointing each epoch);
  the times are the ``trainer.fit`` call's: wall, and the process's CPU time (``getrusage``:
  user + system) over the call.
- ``hf``: tests/integrations/scripts/hf_app.py, a 2-layer BERT from a config, 4 epochs of 32
  optimizer steps (128 steps, evaluation and checkpoint each epoch); the times are the Trainer's
  ``train_runtime`` and the process's CPU time over ``trainer.train()``.
- ``losses``: the LightningModule that appends each step's loss to ``self.train_losses`` (the
  TG201 bug), plain and under ``trainguard run``; the times are the whole process's wall and CPU
  time, and the run must report TG201 at the ``append`` line.

CPU time is what the watcher itself adds, nearly independent of other load on the machine; wall
time is what the user waits. Prints each time, and per case and measure the median ratio
watched / plain with its range over the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "tests" / "integrations" / "scripts"
ENV = dict(os.environ, PYTHONPATH=str(ROOT / "src"), OMP_NUM_THREADS="1")
# Byte code cached, as an installed package has it (pip compiles on install): with
# PYTHONDONTWRITEBYTECODE set, every process would compile trainguard's ~80 modules again when
# the watcher starts (0.3-0.6 s, inside the callback's fit time). The cache goes to a temporary
# folder, not into the source tree.
ENV.pop("PYTHONDONTWRITEBYTECODE", None)
ENV["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), "trainguard-bench-pycache")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(argv: list[str], cwd: str) -> tuple[str, float, float]:
    """Run ``argv``; its output, wall seconds and CPU seconds (user + system)."""
    start, cpu = time.perf_counter(), _children_cpu()
    r = subprocess.run(argv, cwd=cwd, env=ENV, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - start, _children_cpu() - cpu
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{r.stderr[-3000:]}")
    return r.stdout + r.stderr, wall, cpu


def _variants(script: str, args: list[str]) -> dict[str, list[str]]:
    py = [sys.executable]
    return {"plain": py + [script, *args, "--watch", "none"],
            "callback": py + [script, *args, "--watch", "callback"],
            "run": py + ["-m", "trainguard", "run", script, *args, "--watch", "none"]}


def lightning(tmp: str) -> dict[str, float]:
    args = ["correct", "--epochs", "7", "--root", tmp]
    out = {}
    for name, argv in _variants(str(SCRIPTS / "lightning_app.py"), args).items():
        text, _, _ = _run(argv, tmp)
        fits = re.findall(r"correct: fit_s ([\d.]+), (\d+) optimizer steps, cpu_s ([\d.]+)", text)
        # the first fit: 112 steps (the second is a short resume)
        out[name], out[f"{name} cpu"] = float(fits[0][0]), float(fits[0][2])
        assert int(fits[0][1]) >= 100, fits
    return out


def hf(tmp: str) -> dict[str, float]:
    args = ["correct", "--epochs", "4", "--samples", "1024", "--root", tmp]
    out = {}
    for name, argv in _variants(str(SCRIPTS / "hf_app.py"), args).items():
        text, _, _ = _run(argv, tmp)
        runtime, steps, cpu = re.findall(
            r"correct: train_runtime ([\d.]+) s, (\d+) optimizer steps, cpu_s ([\d.]+)", text)[0]
        out[name], out[f"{name} cpu"] = float(runtime), float(cpu)
        assert int(steps) >= 100, steps
    return out


def losses(tmp: str) -> dict[str, float]:
    script = str(SCRIPTS / "lightning_app.py")
    args = ["losses-on-self", "--epochs", "7", "--root", tmp]
    _, plain, plain_cpu = _run([sys.executable, script, *args, "--watch", "none"], tmp)
    report = os.path.join(tmp, "losses.json")
    _, watched, watched_cpu = _run([sys.executable, "-m", "trainguard", "run", "--report", report,
                                    script, *args, "--watch", "none"], tmp)
    found = [(f["code"], f["line"]) for f in json.loads(Path(report).read_text())["findings"]]
    line = next(i for i, text in enumerate(Path(script).read_text().splitlines(), 1)
                if "# cause: losses-on-self" in text)
    assert ("TG201", line) in found, found
    return {"plain": plain, "run": watched, "plain cpu": plain_cpu, "run cpu": watched_cpu}


CASES = {"lightning": lightning, "hf": hf, "losses": losses}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default=",".join(CASES))
    args = parser.parse_args()
    cases = args.only.split(",")
    # fill the byte-code cache: every module a watcher imports (its checks too)
    subprocess.run([sys.executable, "-c", "from trainguard.sanitize.checks import discover; "
                    "import trainguard.integrations.lightning, trainguard.sanitize.watcher; "
                    "discover()"], env=ENV, check=True)
    times: dict[str, list[dict[str, float]]] = {c: [] for c in cases}
    for i in range(args.rounds):
        for case in cases:
            with tempfile.TemporaryDirectory() as tmp:
                t = CASES[case](tmp)
            times[case].append(t)
            print(f"round {i + 1} {case}: " + ", ".join(f"{k} {v:.2f} s" for k, v in t.items()),
                  flush=True)
    for case in cases:
        rows = times[case]
        for watched in [k for k in rows[0] if not k.startswith("plain")]:
            base = "plain cpu" if watched.endswith(" cpu") else "plain"
            ratios = [r[watched] / r[base] for r in rows]
            extra = ""
            if case == "losses" and base == "plain":
                limit = [1.5 * r["plain"] + 10 for r in rows]
                extra = (f"; within 1.5x plain + 10 s: "
                         f"{sum(r[watched] <= lim for r, lim in zip(rows, limit))}/{len(rows)}")
            print(f"{case} {watched}/{base}: median {statistics.median(ratios):.3f} "
                  f"(min {min(ratios):.3f}, max {max(ratios):.3f}, {len(ratios)} rounds){extra}")


if __name__ == "__main__":
    main()
