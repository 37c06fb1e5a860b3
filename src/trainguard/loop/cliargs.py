"""Argument types and the help formatter shared by ``trainguard train`` and ``predict``.

Imports nothing heavy: ``trainguard --help`` builds these parsers without torch.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = ["HelpFormatter", "size", "floats", "positive", "non_negative_int", "non_negative_float",
           "resolved"]


class HelpFormatter(argparse.HelpFormatter):
    """Appends ``(default: X)`` once, only where the help does not already speak of the
    default and the default says something (not ``None`` or ``False``)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if "default" in text or not action.option_strings or default is None \
                or default is False or default is argparse.SUPPRESS:
            return text
        return f"{text} (default: %(default)s)"


def size(text: str) -> tuple[int, int]:
    """``N`` or ``HxW`` (also ``H,W``) as ``(H, W)`` pixels."""
    try:
        parts = [int(p) for p in text.lower().replace("x", ",").split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or HxW, got {text!r}") from None
    if len(parts) == 1:
        parts *= 2
    if len(parts) != 2 or min(parts) < 1:
        raise argparse.ArgumentTypeError(f"expected N or HxW with positive sizes, got {text!r}")
    return parts[0], parts[1]


def floats(text: str) -> tuple[float, ...]:
    """Comma-separated numbers."""
    try:
        return tuple(float(p) for p in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") \
            from None


def positive(kind: type) -> Any:
    """A parser of ``kind`` values > 0."""
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {kind.__name__}, got {text!r}") \
                from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value
    parse.__name__ = kind.__name__
    return parse


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def resolved(path: str | None) -> str | None:
    """``path`` made absolute (``~`` expanded, symlinks resolved), so a run stored with it
    resumes from any working directory."""
    return None if path is None else str(Path(path).expanduser().resolve())


# `trainguard train` settings that may differ on --resume without changing what the run computes
# (where it runs, how it is shown, how fast): not stored in the run's configuration.
FREE_ON_RESUME = {"device", "num_workers", "progress", "resume", "force", "run_dir", "guard",
                  "compile", "log_every_steps"}

# Settings that name files: stored resolved.
PATH_SETTINGS = ("csv", "root", "val_csv", "val_root")
