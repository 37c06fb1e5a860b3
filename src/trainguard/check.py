"""``trainguard check``: lint a script, then run it under the sanitizer; one combined report.

    trainguard check train.py --epochs 3
    trainguard check --report findings.json train.py

The static findings are printed first (a pitfall seen in the source before anything runs), then
the script runs unchanged under the runtime checks. Exit status: the script's own when it fails;
otherwise 1 when either layer found something, 0 when both are clean; 2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from trainguard.cliargs import output_file

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "check", help="lint a script, then run it under the sanitizer (one report)",
        description="Lint SCRIPT, then run it unchanged under the runtime sanitizer, and report "
                    "the findings of both in one place.")
    parser.add_argument("--select", metavar="CODES", help="code prefixes to report, e.g. TG2")
    parser.add_argument("--ignore", metavar="CODES", help="code prefixes not to report")
    parser.add_argument("--report", metavar="FILE", type=output_file(),
                        help='write every finding as JSON {"findings": [...]} to FILE')
    parser.add_argument("target", metavar="SCRIPT", help="the script to lint and run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from trainguard import exitcodes
    from trainguard.config import load_config
    from trainguard.errors import UsageError
    from trainguard.lint.runner import lint_paths

    script = Path(args.target)
    if not script.is_file():
        raise UsageError(f"no such script: {script}")
    config = load_config(script).with_overrides(select=args.select, ignore=args.ignore)
    static = lint_paths([str(script)], config=config).findings
    for finding in static:
        print(finding.format(), file=sys.stderr)
    print(f"trainguard check: lint found {len(static)} finding(s) in {script}; running it under "
          "the sanitizer", file=sys.stderr, flush=True)

    from trainguard.sanitize.runner import die_of_pending_signal, run_target
    from trainguard.sanitize.watcher import watch

    with watch(select=args.select, ignore=args.ignore) as watcher:
        status = run_target(str(script), list(args.args), kind="path", on_error=watcher.explain)
    runtime = list(watcher.findings)
    if args.report:
        findings = [f.to_dict() for f in [*static, *runtime]]
        Path(args.report).write_text(json.dumps({"findings": findings}, indent=2) + "\n")
    print(f"trainguard check: {len(static)} lint and {len(runtime)} runtime finding(s)",
          file=sys.stderr)
    die_of_pending_signal()  # a SIGTERM that ended the script kills us, as it kills python
    if status != 0:
        return status
    return exitcodes.FINDINGS if static or runtime else exitcodes.CLEAN
