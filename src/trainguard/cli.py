"""The ``trainguard`` command: ``main(argv) -> int``, one module per subcommand.

Each subcommand module defines ``register(subparsers)``, which adds its parser and sets ``func`` to
a ``run(args) -> int``. Subcommand modules import nothing heavy at import time, so that
``trainguard --help`` and ``trainguard lint`` start fast; torch is imported inside ``run``.

Exit statuses: 0 clean, 1 findings, 2 for every error the user can cause (a bad argument, file or
row, named in the message; also a command whose ``trainguard[torch]`` dependencies are not
installed), 3 for a bug in trainguard itself, with the traceback and where to report it.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
import traceback
from typing import Any

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
    "trainguard.rule",
]

# Top-level modules that `pip install "trainguard[torch]"` brings (pyproject's `torch` extra).
_EXTRA_MODULES = {"torch", "numpy", "PIL", "sklearn", "rich", "matplotlib"}


class HelpFormatter(argparse.HelpFormatter):
    """Adds ``(default: X)`` to an option's help unless the help already names its default."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (action.default in (None, False, argparse.SUPPRESS) or "default" in text
                or not text):
            return action.help
        return f"{text} (default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    """Subcommand parsers use :class:`HelpFormatter` unless they choose their own."""

    def __init__(self, *args: Any,
                 formatter_class: type[argparse.HelpFormatter] = HelpFormatter,
                 **kwargs: Any) -> None:
        super().__init__(*args, formatter_class=formatter_class, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trainguard",
        description="Train PyTorch models without silent bugs: a reference loop (train), "
        "a runtime sanitizer (run), a linter (lint) and instruments.",
    )
    parser.add_argument("--version", action="version", version=f"trainguard {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
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
    except ModuleNotFoundError as exc:
        missing = _missing_extra_module(exc)
        if missing is None:
            return _internal_error(args.command)
        print(f"trainguard {args.command}: error: this command needs {missing}, which is not "
              f"installed; install trainguard's torch extra: python -m pip install "
              f"\"trainguard[torch]\" (install torch first to choose its build, e.g. "
              f"python -m pip install torch==2.13.0)", file=sys.stderr)
        return exitcodes.USAGE
    except Exception:  # a bug in trainguard: say so, keep the traceback
        return _internal_error(args.command)


def _missing_extra_module(exc: ModuleNotFoundError) -> str | None:
    """The missing ``trainguard[torch]`` module that ``exc`` is about, or None."""
    top = (exc.name or "").partition(".")[0]
    if top not in _EXTRA_MODULES:
        return None
    try:
        found = importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        found = False
    return None if found else top


def _internal_error(command: str) -> int:
    """Print the traceback of the exception being handled and where to report it (exit 3)."""
    from trainguard.urls import issues_url

    traceback.print_exc()
    where = issues_url() or "trainguard's issue tracker"
    print(f"trainguard {command}: internal error (exit 3): this is a bug in trainguard "
          f"{__version__}, not in your code or input; please report it at {where} with the "
          "command and the traceback above", file=sys.stderr)
    return exitcodes.INTERNAL
