"""``trainguard lint PATH...``: check scripts for silent training bugs without running them.

Exit status: 0 clean, 1 findings, 2 usage error or unreadable input, 3 internal error.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from trainguard import __version__, exitcodes

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "lint", help="check scripts for silent training bugs without running them",
        description="Check Python files, folders (recursively, honouring .gitignore) and Jupyter "
        "notebooks for silent PyTorch training bugs. Use - to read standard input. "
        "Exit status: 0 clean, 1 findings, 2 usage error, 3 internal error.")
    p.add_argument("paths", nargs="*", default=["."], metavar="PATH",
                   help="files or folders to check, or - for standard input (default: .)")
    p.add_argument("--format", choices=["text", "json", "sarif", "github"], default="text",
                   help="output format (default: text)")
    p.add_argument("--select", metavar="CODES",
                   help="only these codes or prefixes, comma-separated (e.g. TG2,TG301)")
    p.add_argument("--ignore", metavar="CODES", help="leave out these codes or prefixes")
    p.add_argument("--statistics", action="store_true",
                   help="print a count per code at the end (to stderr with --format json/sarif/"
                        "github)")
    p.add_argument("--fix", action="store_true",
                   help="apply the fixes that cannot change what the script computes")
    p.add_argument("--unsafe-fixes", action="store_true",
                   help="with --fix or --diff, also the fixes that may change it")
    p.add_argument("--diff", action="store_true", help="show the fixes as a diff, write nothing")
    p.add_argument("--stdin-filename", metavar="NAME", default="-",
                   help="the name to report for standard input (default: -)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from trainguard.config import load_config
    from trainguard.lint.runner import lint_paths
    from trainguard.report import render, statistics

    paths = list(args.paths)
    config = load_config(Path("." if paths == ["-"] else paths[0]))
    config = config.with_overrides(select=args.select, ignore=args.ignore)
    outcome = lint_paths(paths, config=config, stdin_name=args.stdin_filename,
                         fix=args.fix and not args.diff, diff=args.diff,
                         unsafe=args.unsafe_fixes)
    out = render(outcome.findings, args.format, tool_version=__version__)
    try:
        if outcome.diff:
            sys.stdout.write(outcome.diff)
        if out:
            print(out)
        if args.statistics and outcome.findings:
            # machine formats stay parseable: the counts go to stderr there
            print(statistics(outcome.findings),
                  file=sys.stdout if args.format == "text" else sys.stderr)
        sys.stdout.flush()
    except BrokenPipeError:  # `trainguard lint . | head`: the reader left, the status stands
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (silences the flush at exit)
    if args.format == "text" and (outcome.fixed or args.fix) and not args.diff:
        print(f"trainguard lint: fixed {outcome.fixed} finding(s)", file=sys.stderr)
    if args.diff:
        return exitcodes.FINDINGS if outcome.diff or outcome.findings else exitcodes.CLEAN
    return exitcodes.FINDINGS if outcome.findings else exitcodes.CLEAN
