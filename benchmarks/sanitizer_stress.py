"""What ``trainguard run`` costs on scripts that stress the sanitizer, and what its exit takes.

Each script of ``tests/sanitize/stress/`` (10^5-node graphs kept alive, 10^4 tensors in nested
containers, 2,000 steps, manual SGD without an optimizer, an LBFGS closure, an inference loop, a
forward that raises, generators and threads, ``sys.exit()`` in the loop, SIGTERM, ...) runs as
``python SCRIPT`` and under the watcher, alternately, ``--runs`` times each (plain first in odd
runs, watched first in even ones). The watched run is this file with ``--child SCRIPT``: what
``trainguard run SCRIPT`` does (``watch()`` around ``run_target``), which also writes the
watchdog's exit time (the exit analyses, the summary and the report) to a JSON file.

Printed per script: the median wall time of each side (seconds, the whole process: interpreter
start, imports, the run, the exit), their ratio, whether the median watched time is within
1.5 x plain + 2 s, the ratio of the median CPU times (user + system of each run's process tree: on a
machine shared with other work the steadier figure, as wall time also counts the waits for a
core), whether the saved weights are identical ("-": the script saves none), the TG002 count, the
median exit time, the exit statuses and the codes reported. The last line gives the median exit
time over all watched runs.

Usage::

    python benchmarks/sanitizer_stress.py                     # every script, 3 runs each
    python benchmarks/sanitizer_stress.py --runs 5 --only manual_sgd,long_run --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STRESS = ROOT / "tests" / "sanitize" / "stress"


def child(script: str, timing: str) -> int:
    """Run ``script`` as ``trainguard run`` would; write the watchdog's exit time to ``timing``."""
    sys.path.insert(0, str(ROOT / "src"))
    from trainguard.sanitize.runner import die_of_pending_signal, run_target
    from trainguard.sanitize.watcher import watch

    report = timing + ".report.json"
    with watch(report=report) as watcher:
        status = run_target(script, [], kind="path", on_error=watcher.explain)
    with open(timing, "w", encoding="utf-8") as f:
        json.dump({"exit_s": watcher.watchdog.exit_s, "status": status}, f)
    die_of_pending_signal()  # as trainguard run: a SIGTERM that ended the script kills us
    return status


def _cpu_s() -> float:
    """User + system CPU seconds of the finished child processes so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(cmd: list[str], weights: str, timeout: float) -> tuple[float, float, int]:
    env = dict(os.environ, STRESS_WEIGHTS=weights, PYTHONPATH=str(ROOT / "src"))
    start, cpu = time.perf_counter(), _cpu_s()
    proc = subprocess.run(cmd, cwd=STRESS, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, timeout=timeout)
    return time.perf_counter() - start, _cpu_s() - cpu, proc.returncode


def _same_weights(a: str, b: str) -> bool | None:
    import torch

    if not (os.path.exists(a) and os.path.exists(b)):
        return None
    x, y = torch.load(a), torch.load(b)
    return x.keys() == y.keys() and all(
        x[k].device.type == "meta" or torch.equal(x[k], y[k]) for k in x)


def measure(script: Path, runs: int, timeout: float, tmp: Path) -> dict:
    plain_s, watched_s, exit_s, same, tg002, statuses = [], [], [], [], 0, set()
    cpu_s: dict[str, list[float]] = {"plain": [], "watched": []}
    codes: set[str] = set()
    tmp = tmp / script.stem
    tmp.mkdir()
    for i in range(runs):
        w_plain, w_watched = tmp / f"plain{i}.pt", tmp / f"watched{i}.pt"
        timing = tmp / f"timing{i}.json"
        sides = [("plain", [sys.executable, str(script)], w_plain),
                 ("watched", [sys.executable, __file__, "--child", str(script), str(timing)],
                  w_watched)]
        for side, cmd, weights in (sides if i % 2 == 0 else sides[::-1]):
            seconds, cpu, status = _run(cmd, str(weights), timeout)
            (plain_s if side == "plain" else watched_s).append(seconds)
            cpu_s[side].append(cpu)
            statuses.add((side, status))
        if timing.exists():
            exit_s.append(json.loads(timing.read_text())["exit_s"])
            report = json.loads(Path(str(timing) + ".report.json").read_text())
            tg002 += sum(f["code"] == "TG002" for f in report["findings"])
            codes.update(f["code"] for f in report["findings"])
        same.append(_same_weights(str(w_plain), str(w_watched)))
    plain, watched = statistics.median(plain_s), statistics.median(watched_s)
    return {"script": script.stem, "plain_s": plain, "watched_s": watched,
            "ratio": watched / plain, "within": watched <= 1.5 * plain + 2.0,
            "cpu_plain_s": statistics.median(cpu_s["plain"]),
            "cpu_watched_s": statistics.median(cpu_s["watched"]),
            "same_weights": None if None in same else all(same), "tg002": tg002,
            "statuses": sorted(statuses), "findings": sorted(codes),
            "exit_s": statistics.median(exit_s) if exit_s else None,
            "exit_all": exit_s}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each side (default 3)")
    parser.add_argument("--only", default="", help="comma-separated script names")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per run")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--child", nargs=2, metavar=("SCRIPT", "TIMING"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(*args.child)
    names = [n for n in args.only.split(",") if n]
    scripts = [p for p in sorted(STRESS.glob("[!_]*.py")) if not names or p.stem in names]
    rows = []
    print(f"{'script':<20} {'plain s':>8} {'watched s':>9} {'ratio':>6} {'<=1.5x+2s':>9} "
          f"{'CPU ratio':>9} {'weights':>8} {'TG002':>5} {'exit s':>7}  statuses; findings")
    with tempfile.TemporaryDirectory() as tmp:
        for script in scripts:
            row = measure(script, args.runs, args.timeout, Path(tmp))
            rows.append(row)
            weights = {True: "same", False: "DIFFER", None: "-"}[row["same_weights"]]
            shown = ", ".join(f"{side} {status}" for side, status in row["statuses"])
            print(f"{row['script']:<20} {row['plain_s']:8.2f} {row['watched_s']:9.2f} "
                  f"{row['ratio']:6.2f} {'yes' if row['within'] else 'NO':>9} "
                  f"{row['cpu_watched_s'] / row['cpu_plain_s']:9.2f} {weights:>8} "
                  f"{row['tg002']:5d} {row['exit_s']:7.3f}  {shown}; "
                  f"{', '.join(row['findings']) or 'none'}", flush=True)
    every_exit = [s for row in rows for s in row["exit_all"]]
    print(f"exit analyses: median {statistics.median(every_exit):.3f} s, max "
          f"{max(every_exit):.3f} s over {len(every_exit)} watched runs")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
