"""Lint speed, before and after a change: two source trees of trainguard lint the same folders.

Each round runs ``trainguard lint`` once per source tree as a fresh process (start-up counts),
interleaved so that machine load affects both alike, and records the CPU time the process used
(user + system, from ``resource``; steadier than wall time on a shared machine) and its wall
time. The last line gives the median CPU-time ratio (candidate / baseline) with the spread of
the per-round ratios::

    git worktree add /tmp/tg-base main
    python benchmarks/lint_tree.py /path/to/repos --baseline /tmp/tg-base/src --rounds 5

``--candidate`` defaults to this checkout's ``src``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def run_once(src: str, folders: list[str]) -> tuple[float, float, int]:
    """(CPU seconds, wall seconds, findings) of one ``trainguard lint`` process."""
    env = dict(os.environ, PYTHONPATH=src)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "trainguard", "lint", "--format", "text",
                           *folders], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"lint with {src} failed with status {proc.returncode}:\n"
                         f"{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    findings = sum(1 for line in proc.stdout.splitlines() if " TG" in line)
    return cpu, wall, findings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", help="folders (or files) to lint")
    parser.add_argument("--baseline", required=True, help="the src folder to compare against")
    parser.add_argument("--candidate", default=str(SRC), help="the src folder under test")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    args = parser.parse_args(argv)

    ratios, base_cpu, cand_cpu = [], [], []
    for r in range(args.rounds):
        order = [("baseline", args.baseline), ("candidate", args.candidate)]
        if r % 2:
            order.reverse()
        got = {}
        for name, src in order:
            got[name] = run_once(src, args.folders)
            cpu, wall, n = got[name]
            print(f"round {r + 1} {name:9s} cpu {cpu:7.2f} s  wall {wall:7.2f} s  "
                  f"{n} findings", flush=True)
        base_cpu.append(got["baseline"][0])
        cand_cpu.append(got["candidate"][0])
        ratios.append(got["candidate"][0] / got["baseline"][0])
    print(f"median cpu: baseline {statistics.median(base_cpu):.2f} s, candidate "
          f"{statistics.median(cand_cpu):.2f} s")
    print(f"cpu ratio candidate/baseline: median {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}, {len(ratios)} rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
