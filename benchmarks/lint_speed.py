"""Lint speed: trainguard lint against TorchFix on the same files, as whole processes.

Both linters are run as a user runs them (a fresh process each time, so start-up counts), on the
same list of ``.py`` files, interleaved round by round so that machine load affects both alike.
The median wall time of the rounds gives files/s and lines/s; the last line is the ratio of
lines/s (trainguard / TorchFix).

TorchFix pins its own libcst, so install it into a virtual environment of its own::

    python -m venv /tmp/torchfix-venv && /tmp/torchfix-venv/bin/pip install torchfix
    python benchmarks/lint_speed.py CORPUS_DIR --torchfix /tmp/torchfix-venv/bin/torchfix

TorchFix uses every core by default (``-j``); trainguard uses one. Pass ``--torchfix-jobs 1`` to
compare one core against one core.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
SKIP = {".git", ".venv", "venv", "build", "dist", "__pycache__", "node_modules", "site-packages"}


def corpus_files(roots: list[str]) -> list[Path]:
    files = []
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP)
            files.extend(Path(dirpath) / f for f in sorted(filenames) if f.endswith(".py"))
    return files


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{cmd[0]} failed with status {proc.returncode}:\n{proc.stderr[-2000:]}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="+", help="folders of Python files to lint")
    parser.add_argument("--torchfix", help="path to the torchfix executable (own venv)")
    parser.add_argument("--torchfix-jobs", type=int, default=None,
                        help="TorchFix -j (default: its own default, every core)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    args = parser.parse_args(argv)

    files = corpus_files(args.corpus)
    if not files:
        raise SystemExit(f"no .py files under {', '.join(args.corpus)}")
    lines = sum(p.read_bytes().count(b"\n") + 1 for p in files)
    names = [str(p) for p in files]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH",
                                                                                  "")]))
    tools = {"trainguard": [sys.executable, "-m", "trainguard", "lint", "--format", "json",
                            *names]}
    if args.torchfix:
        jobs = ["-j", str(args.torchfix_jobs)] if args.torchfix_jobs else []
        tools["torchfix"] = [args.torchfix, *jobs, *names]
    times: dict[str, list[float]] = {name: [] for name in tools}
    for round_no in range(1, args.rounds + 1):
        for name, cmd in tools.items():
            times[name].append(timed(cmd, env))
        print(f"round {round_no}: " + ", ".join(f"{n} {t[-1]:.2f} s" for n, t in times.items()),
              file=sys.stderr)

    print(f"corpus: {len(files)} files, {lines} lines; {args.rounds} rounds, median wall time")
    rates = {}
    for name, ts in times.items():
        median = statistics.median(ts)
        rates[name] = lines / median
        print(f"{name:>10}: {median:8.2f} s  {len(files) / median:9.1f} files/s  "
              f"{lines / median:10.0f} lines/s")
    if "torchfix" in rates:
        print(f"ratio (lines/s, trainguard / torchfix): "
              f"{rates['trainguard'] / rates['torchfix']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
