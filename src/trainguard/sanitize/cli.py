"""``trainguard run``: run a script or module under the runtime sanitizer.

    trainguard run train.py --epochs 3
    trainguard run -m mypkg.train --epochs 3
    trainguard run notebook.ipynb    (its code cells in order)
    trainguard run --strict --report findings.json train.py
    torchrun --nproc-per-node 2 -m trainguard run --report findings.json train.py

Exit status: the script's own (0 when it returns; an unhandled SIGTERM kills trainguard run
after its report, as it kills python), 1 with ``--strict`` when the script succeeded
but findings were reported, 2 for a usage error, 3 for an internal error of trainguard.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from trainguard.cliargs import output_file

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run", help="run a training script under the runtime sanitizer",
        description="Run a PyTorch script unchanged and report the silent training bugs seen: "
                    "each finding on stderr as first seen, and a summary table at exit.",
    )
    parser.add_argument("-m", dest="module", nargs=argparse.REMAINDER, metavar="MODULE ...",
                        help="run a module as `python -m MODULE` would (last option; the rest "
                             "are the module's arguments)")
    parser.add_argument("--select", metavar="CODES",
                        help="comma-separated code prefixes to report, e.g. TG2,TG301")
    parser.add_argument("--ignore", metavar="CODES",
                        help="comma-separated code prefixes not to report")
    parser.add_argument("--report", metavar="FILE", type=output_file(),
                        help='write the findings as JSON {"findings": [...]} to FILE (under '
                             'torchrun, rank 0 writes every rank\'s findings, merged)')
    parser.add_argument("--every-step", action="store_true",
                        help="check every optimizer step; by default, once the training loop "
                             "repeats the same calls, one step in 16 is checked in full (one "
                             "in 32 once 8 such samples in a row found nothing)")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 when the script succeeds but findings were reported")
    parser.add_argument("target", nargs="?", metavar="SCRIPT",
                        help="the script to run: a .py file, or a .ipynb notebook (its code cells "
                             "in order); or -m MODULE")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from trainguard import exitcodes
    from trainguard.errors import UsageError
    from trainguard.sanitize.runner import die_of_pending_signal, run_target
    from trainguard.sanitize.watcher import watch

    if args.module is not None:
        if not args.module:
            raise UsageError("-m needs a module name: trainguard run -m package.module [args]")
        kind, target, rest = "module", args.module[0], args.module[1:]
    elif args.target:
        kind, target, rest = "path", args.target, args.args
        if not Path(target).is_file():  # before the watcher starts: nothing ran, nothing to sum up
            raise UsageError(f"no such script {target!r} (give a .py file, or -m package.module)")
        if target.endswith(".ipynb"):
            from trainguard.notebook import notebook_cells

            notebook_cells(target)  # (not a notebook: exit 2 before anything runs)
    else:
        raise UsageError("give a script to run (trainguard run train.py) or a module "
                         "(trainguard run -m package.module)")
    with watch(select=args.select, ignore=args.ignore, report=args.report,
               every_step=args.every_step) as watcher:
        status = run_target(target, rest, kind=kind, on_error=watcher.explain)
    die_of_pending_signal()  # the report is written: an unhandled SIGTERM kills us as python
    if args.strict and status == 0 and watcher.findings:
        return exitcodes.FINDINGS
    return status
