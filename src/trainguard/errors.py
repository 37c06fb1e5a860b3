"""Typed errors raised at trainguard's boundaries.

Every error a user can cause (a bad argument, a bad data file, a damaged checkpoint) is a
``UsageError``: the CLI prints its message and exits with status 2. Anything else that escapes is a
bug in trainguard and exits with status 3.
"""

from __future__ import annotations

__all__ = ["TrainguardError", "UsageError", "DataError", "CheckpointError"]


class TrainguardError(Exception):
    """Base class of the errors trainguard raises on purpose."""


class UsageError(TrainguardError, ValueError):
    """A bad argument or bad input: the message says what was seen and what to do (exit 2)."""


class DataError(UsageError):
    """A data file, image, row or label that cannot be used (exit 2)."""


class CheckpointError(UsageError):
    """A checkpoint that is missing, damaged, unsafe or does not fit the model (exit 2)."""
