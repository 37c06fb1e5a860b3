"""What watching a Lightning or Hugging Face Trainer run costs: plain, through the trainer
callback, and under ``trainguard run``.

    python benchmarks/integrations_overhead.py [--rounds 10] [--only lightning,hf,losses]
        [--scale 1] [--baseline OTHER/src] [--count time|instructions] [--jobs N] [--keep DIR]

Each round runs every variant of a case once, each in a fresh process, in an order that turns
from round to round (rotated by one, and reversed every other round), so that a machine whose
load changes weighs on all variants alike. The cases:

- ``lightning``: tests/integrations/scripts/lightning_app.py, 7 epochs of 16 optimizer steps
  (112 steps at ``--scale 1``; ``--scale K`` makes the epochs K times longer), bf16-mixed,
  accumulate_grad_batches=2, validation and checkpointing each epoch; timed: the
  ``trainer.fit`` call.
- ``hf``: tests/integrations/scripts/hf_app.py, a 2-layer BERT from a config, 4 epochs of 32
  optimizer steps (128 steps at ``--scale 1``), evaluation and checkpoint each epoch; timed:
  ``trainer.train()`` (wall: the Trainer's ``train_runtime``).
- ``losses``: the LightningModule that appends each step's loss to ``self.train_losses`` (the
  TG201 bug), plain and under ``trainguard run``; timed: the whole process. Every watched run
  must report TG201 at the ``append`` line, and is judged against 1.5x plain + 10 s.

Measures, per variant and round: ``cpu`` is the CPU time (user + system, all threads, and
children such as DataLoader workers, from ``getrusage``) over the timed part, as the script
reports it; ``wall`` the wall time of the same part; ``proc cpu`` the CPU time of the whole
process and its children (startup and imports included). CPU time is the steadier measure of
what the watcher adds on a shared machine (waiting for a core is not counted); wall time is what
the user waits. Each watched time is divided by the plain time of the same round; the summary
gives, per case, variant and measure, the median of those ratios, their quartiles and range, and
the load average seen while measuring.

``--baseline OTHER/src`` adds the callback and ``run`` variants of another checkout of
trainguard (its ``src`` folder; the same scripts), interleaved with this one's in every round:
a before/after comparison measured in the same window.

``--count instructions`` (``lightning`` and ``hf`` only) counts instead of timing: each variant
runs once under valgrind's callgrind (``valgrind`` and a C compiler with valgrind's headers are
needed), instrumented only over the timed part (the script turns callgrind's instrumentation on
and off through a client request, from a small library built in a temporary folder; imports,
building the model and the ``trainguard run`` start are not counted), and the summary gives
each watched variant's instructions divided by plain's. The count is the same whatever the load
(``PYTHONHASHSEED=0``, one thread): a measure of the work the watcher adds, not of time. It
leaves out the kernel's work (system calls such as the clock reads), waiting (for a core, for
memory, for the disk), cache and branch effects, and it weighs every instruction alike (a
Python bytecode's dispatch as much as a vectorized multiply). Under callgrind a run is 50-100
times slower; ``--jobs N`` runs N of them at once (default: the machine's cores); ``--keep DIR``
keeps callgrind's files, whose costs by C function ``callgrind_annotate`` lists (the Python
interpreter's own functions, torch's kernels: where the added instructions go).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "tests" / "integrations" / "scripts"
BASE_ENV = dict(os.environ, OMP_NUM_THREADS="1")
# Byte code cached, as an installed package has it (pip compiles on install): with
# PYTHONDONTWRITEBYTECODE set, every process would compile trainguard's ~80 modules again when
# the watcher starts (0.3-0.6 s, inside the callback's fit time). The cache goes to a temporary
# folder, not into the source tree.
BASE_ENV.pop("PYTHONDONTWRITEBYTECODE", None)
BASE_ENV["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), "trainguard-bench-pycache")
LOSSES_LIMIT = (1.5, 10.0)  # a watched losses-on-self run: at most 1.5x plain + 10 s (wall)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(argv: list[str], cwd: str, src: Path,
         env: dict[str, str] | None = None) -> tuple[str, float, float]:
    """Run ``argv`` with ``src`` first on the path; its output, wall seconds and CPU seconds of
    the process and its children."""
    env = dict(env or BASE_ENV, PYTHONPATH=str(src))
    start, cpu = time.perf_counter(), _children_cpu()
    r = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - start, _children_cpu() - cpu
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{r.stderr[-3000:]}")
    return r.stdout + r.stderr, wall, cpu


def _argv(mode: str, script: Path, args: list[str], report: str | None = None) -> list[str]:
    """The command line of one variant: ``plain``, ``callback`` or ``run``."""
    watch = ["--watch", "callback" if mode == "callback" else "none"]
    if mode != "run":
        return [sys.executable, str(script), *args, *watch]
    extra = ["--report", report] if report else []
    return [sys.executable, "-m", "trainguard", "run", *extra, str(script), *args, *watch]


def lightning(mode: str, src: Path, tmp: str, scale: int, prefix: tuple[str, ...] = (),
                env: dict[str, str] | None = None) -> dict:
    args = ["correct", "--epochs", "7", "--samples", str(512 * scale), "--no-resume",
            "--root", tmp]
    argv = [*prefix, *_argv(mode, SCRIPTS / "lightning_app.py", args)]
    text, _, proc_cpu = _run(argv, tmp, src, env)
    wall, steps, cpu = re.findall(
        r"correct: fit_s ([\d.]+), (\d+) optimizer steps, cpu_s ([\d.]+)", text)[0]
    assert int(steps) >= 100, steps
    return {"cpu": float(cpu), "wall": float(wall), "proc cpu": proc_cpu, "steps": int(steps),
            "text": text}


def hf(mode: str, src: Path, tmp: str, scale: int, prefix: tuple[str, ...] = (),
         env: dict[str, str] | None = None) -> dict:
    args = ["correct", "--epochs", "4", "--samples", str(1024 * scale), "--no-resume",
            "--root", tmp]
    argv = [*prefix, *_argv(mode, SCRIPTS / "hf_app.py", args)]
    text, _, proc_cpu = _run(argv, tmp, src, env)
    wall, steps, cpu = re.findall(
        r"correct: train_runtime ([\d.]+) s, (\d+) optimizer steps, cpu_s ([\d.]+)", text)[0]
    assert int(steps) >= 100, steps
    return {"cpu": float(cpu), "wall": float(wall), "proc cpu": proc_cpu, "steps": int(steps),
            "text": text}


def losses(mode: str, src: Path, tmp: str, scale: int) -> dict[str, float]:
    script = SCRIPTS / "lightning_app.py"
    args = ["losses-on-self", "--epochs", "7", "--samples", str(512 * scale), "--root", tmp]
    report = os.path.join(tmp, "losses.json")
    text, wall, cpu = _run(_argv(mode, script, args, report), tmp, src)
    steps = int(re.findall(r"losses-on-self: fit_s [\d.]+, (\d+) optimizer steps", text)[0])
    if mode == "run":
        found = [(f["code"], f["line"]) for f in json.loads(Path(report).read_text())["findings"]]
        line = next(i for i, t in enumerate(script.read_text().splitlines(), 1)
                    if "# cause: losses-on-self" in t)
        if ("TG201", line) not in found:
            raise SystemExit(f"losses-on-self under {src}: no TG201 at line {line}: {found}")
    return {"cpu": cpu, "wall": wall, "steps": steps}


# the client request the scripts issue around their timed part (TRAINGUARD_CALLGRIND_LIB)
CALLGRIND_C = """#include <valgrind/callgrind.h>
void tg_instrument(int on) {
    if (on) { CALLGRIND_START_INSTRUMENTATION; } else { CALLGRIND_STOP_INSTRUMENTATION; }
}
"""


def callgrind_library(folder: str) -> str:
    """Build the library whose ``tg_instrument(int)`` turns callgrind's instrumentation on or
    off; its path."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--count instructions needs valgrind (apt-get install valgrind)")
    source, library = os.path.join(folder, "tg_callgrind.c"), os.path.join(folder, "tg_cg.so")
    Path(source).write_text(CALLGRIND_C)
    cc = os.environ.get("CC", "cc")
    r = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", library, source],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"--count instructions: {cc} could not build the client request "
                         f"(valgrind/callgrind.h missing?):\n{r.stderr[-2000:]}")
    return library


def callgrind_argv(out: str) -> list[str]:
    """The valgrind prefix of a counted run: instrumentation off until the script's client
    request turns it on; callgrind's output to ``out``."""
    return ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]


def callgrind_total(out: str) -> int | None:
    """The instructions counted in callgrind's output file ``out`` (its ``totals:`` line; the
    ``summary:`` line is 0 with --instr-atstart=no), or None when there is none."""
    if not os.path.exists(out):
        return None
    totals = re.findall(r"^totals: (\d+)", Path(out).read_text(), re.M)
    return int(totals[0]) if totals else None


def count(case: str, mode: str, src: Path, library: str, scale: int,
          keep: Path | None = None, tag: str = "") -> tuple[int, int]:
    """Instructions of the timed part of one run of ``case`` in ``mode`` under callgrind, and
    its optimizer steps; with ``keep``, callgrind's output stays there (for callgrind_annotate)."""
    with tempfile.TemporaryDirectory() as tmp:
        name = f"{case}-{mode}{'-baseline' if tag else ''}.callgrind.out"
        out = os.path.join(keep if keep is not None else tmp, name)
        env = dict(BASE_ENV, TRAINGUARD_CALLGRIND_LIB=library, PYTHONHASHSEED="0",
                   MKL_NUM_THREADS="1")
        measure = CASES[case][0]
        text = measure(mode, src, tmp, scale, prefix=tuple(callgrind_argv(out)), env=env)["text"]
        total = callgrind_total(out)
        if total is None:
            raise SystemExit(f"{case} {mode}: no instruction count in callgrind's output\n"
                             f"{text[-2000:]}")
        steps = int(re.findall(r"(\d+) optimizer steps", text)[0])
        return total, steps


def count_all(cases: list[str], sources: dict[str, Path], scale: int, jobs: int,
              keep: Path | None) -> None:
    """``--count instructions``: every variant once under callgrind; watched / plain."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        library = callgrind_library(tmp)
        runs = [(case, mode, tag) for case in cases for mode in CASES[case][1]
                for tag in (sources if mode != "plain" else [""])]
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            futures = {run: pool.submit(count, run[0], run[1], sources[run[2]], library, scale,
                                        keep, run[2])
                       for run in runs}
            counts = {}
            for run, future in futures.items():
                counts[run] = future.result()
                print(f"{run[0]} {run[1]}{run[2]}: {counts[run][0]:,} instructions, "
                      f"{counts[run][1]} steps", flush=True)
    print("\ninstructions of the timed part, watched / plain (callgrind, one run each)\n")
    print("| case | variant | instructions | watched / plain |")
    print("|---|---|---|---|")
    for case in cases:
        plain, steps = counts[(case, "plain", "")]
        print(f"| {case} ({steps} steps) | plain | {plain:,} | 1 |")
        for case_, mode, tag in runs:
            if case_ == case and mode != "plain":
                n = counts[(case, mode, tag)][0]
                print(f"| | {mode}{tag} | {n:,} | {n / plain:.4f} |")


CASES = {"lightning": (lightning, ("plain", "callback", "run")),
         "hf": (hf, ("plain", "callback", "run")),
         "losses": (losses, ("plain", "run"))}


def _order(variants: list[tuple[str, str]], i: int) -> list[tuple[str, str]]:
    """Round ``i``'s order: rotated by ``i``, reversed in odd rounds."""
    k = i % len(variants)
    turned = variants[k:] + variants[:k]
    return turned[::-1] if i % 2 else turned


def _quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def summarize(case: str, rows: list[dict[str, dict[str, float]]]) -> list[str]:
    """Markdown table rows: per watched variant and measure, the ratios to the same round's
    plain time."""
    out = []
    for name in [n for n in rows[0] if n != "plain"]:
        cells = []
        for measure in ("cpu", "wall", "proc cpu"):
            if measure not in rows[0][name]:  # (the losses case times the whole process)
                cells.append("as cpu")
                continue
            ratios = [r[name][measure] / r["plain"][measure] for r in rows]
            low, high = _quartiles(ratios)
            cells.append(f"{statistics.median(ratios):.3f} ({low:.2f}-{high:.2f}; "
                         f"{min(ratios):.2f}-{max(ratios):.2f})")
        extra = ""
        if case == "losses":
            a, b = LOSSES_LIMIT
            held = sum(r[name]["wall"] <= a * r["plain"]["wall"] + b for r in rows)
            extra = f" | within {a}x plain + {b:.0f} s: {held}/{len(rows)}"
        steps = rows[0][name]["steps"]
        out.append(f"| {case} ({steps} steps) | {name} | " + " | ".join(cells) + extra + " |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--only", help=f"cases, comma-separated (default: {','.join(CASES)}; "
                        "lightning,hf with --count instructions)")
    parser.add_argument("--scale", type=int, default=1,
                        help="epochs K times longer (K times the optimizer steps)")
    parser.add_argument("--baseline", type=Path,
                        help="the src folder of another trainguard checkout, measured alongside")
    parser.add_argument("--count", choices=("time", "instructions"), default="time",
                        help="time rounds (default), or count instructions under callgrind")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="--count instructions: runs at once")
    parser.add_argument("--keep", type=Path, help="--count instructions: keep callgrind's "
                        "output files in this folder (callgrind_annotate reads them)")
    args = parser.parse_args()
    counted = args.count == "instructions"
    cases = args.only.split(",") if args.only else (["lightning", "hf"] if counted else list(CASES))
    unknown = set(cases) - set(CASES)
    if unknown:
        parser.error(f"--only: unknown case(s) {sorted(unknown)}; choose from {list(CASES)}")
    if counted and "losses" in cases:
        parser.error("--count instructions: the losses case is timed only (--only lightning,hf)")
    sources = {"": ROOT / "src"}
    if args.baseline is not None:
        if not (args.baseline / "trainguard" / "__init__.py").is_file():
            parser.error(f"--baseline {args.baseline}: no trainguard package in it")
        sources[" (baseline)"] = args.baseline.resolve()
    for src in sources.values():  # fill the byte-code cache: every module a watcher imports
        subprocess.run([sys.executable, "-c", "from trainguard.sanitize.checks import discover; "
                        "import trainguard.integrations.lightning, trainguard.sanitize.watcher; "
                        "discover()"], env=dict(BASE_ENV, PYTHONPATH=str(src)), check=True)
    if counted:
        count_all(cases, sources, args.scale, max(1, args.jobs), args.keep)
        return
    times: dict[str, list[dict[str, dict[str, float]]]] = {c: [] for c in cases}
    loads: list[float] = []
    for i in range(args.rounds):
        for case in cases:
            measure, modes = CASES[case]
            variants = [(mode, tag) for mode in modes
                        for tag in (sources if mode != "plain" else [""])]
            row: dict[str, dict[str, float]] = {}
            for mode, tag in _order(variants, i):
                loads.append(os.getloadavg()[0])
                with tempfile.TemporaryDirectory() as tmp:
                    row[mode + tag] = measure(mode, sources[tag], tmp, args.scale)
                    row[mode + tag].pop("text", None)
            times[case].append(row)
            print(f"round {i + 1} {case}: " + "; ".join(
                f"{name} " + ", ".join(f"{k} {v:.2f}" for k, v in t.items() if k != "steps")
                for name, t in row.items()), flush=True)
    print(f"\nload average (1 min) while measuring: {min(loads):.1f}-{max(loads):.1f}, "
          f"median {statistics.median(loads):.1f}; {args.rounds} rounds")
    print("watched / plain of the same round: median (quartiles; range)\n")
    print("| case | variant | cpu | wall | proc cpu |")
    print("|---|---|---|---|---|")
    for case in cases:
        for line in summarize(case, times[case]):
            print(line)


if __name__ == "__main__":
    main()
