"""The ``trainguard`` command: ``main(argv) -> int``, one module per subcommand.

Each subcommand module defines ``register(subparsers)``, which adds its parser and sets ``func`` to
a ``run(args) -> int``. Subcommand modules import nothing heavy at import time, so that
``trainguard --help`` and ``trainguard lint`` start fast; torch is imported inside ``run``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback

from trainguard import __version__, exitcodes
from trainguard.errors import UsageError

# Order is the order shown in --help.
_SUBCOMMANDS = [
    "trainguard.loop.cli",
    "trainguard.loop.predict_cli",
    "trainguard.sanitize.cli",
    "trainguard.lint.cli",
    "trainguard.check",
    "trainguard.explain.cli",
    "trainguard.env",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trainguard",
        description="Train PyTorch models without silent bugs: a reference loop (train), "
        "a runtime sanitizer (run), a linter (lint) and instruments.",
    )
    parser.add_argument("--version", action="version", version=f"trainguard {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _SUBCOMMANDS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit status (0 clean, 1 findings, 2 usage, 3 internal error)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors and 0 on --help
        return int(exc.code or 0)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return exitcodes.USAGE
    try:
        return int(args.func(args))
    except UsageError as exc:
        print(f"trainguard {args.command}: error: {exc}", file=sys.stderr)
        return exitcodes.USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `trainguard env | head`: the reader left; nothing more to say
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return exitcodes.CLEAN
    except Exception:  # a bug in trainguard: say so, keep the traceback
        traceback.print_exc()
        print(f"trainguard {args.command}: internal error (exit 3); please report it with the "
              "traceback above", file=sys.stderr)
        return exitcodes.INTERNAL
