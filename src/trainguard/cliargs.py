"""Argument types shared by the subcommands: bad values are refused while the command line is
parsed, so argparse names the argument and exits 2 before anything runs or is written.

    parser.add_argument("--report", type=output_file())
    parser.add_argument("-o", "--output", type=output_file(".dot", ".svg"))
    parser.add_argument("--args", type=shell_words, default=[])
    parser.add_argument("--depth", type=int_at_least(1))
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable
from pathlib import Path

__all__ = ["output_file", "shell_words", "int_at_least"]


def output_file(*suffixes: str) -> Callable[[str], str]:
    """A file to write: its folder must exist, it must not be a folder, and, when ``suffixes``
    are given, it must end with one of them (case-insensitive)."""

    def parse(text: str) -> str:
        path = Path(text)
        if suffixes and path.suffix.lower() not in suffixes:
            raise argparse.ArgumentTypeError(
                f"{text}: use a file name ending in {', '.join(suffixes)}")
        if path.is_dir():
            raise argparse.ArgumentTypeError(f"{text} is a folder; give a file name in it")
        folder = path.parent
        if not folder.is_dir():
            raise argparse.ArgumentTypeError(
                f"{text}: folder {folder} does not exist; create it first (mkdir -p {folder})")
        return text

    parse.__name__ = "file name"  # argparse's "invalid <name> value" when something else raises
    return parse


def shell_words(text: str) -> list[str]:
    """One string split the way a POSIX shell splits a command line (quotes kept together)."""
    try:
        return shlex.split(text)
    except ValueError as exc:  # "No closing quotation", "No escaped character"
        raise argparse.ArgumentTypeError(
            f"cannot split {text!r} into arguments: {str(exc).lower()}") from None


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An integer ``>= minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {minimum} or more, got {value}")
        return value

    parse.__name__ = "integer"
    return parse
