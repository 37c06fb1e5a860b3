"""The warning-line probe: PyTorch's warnings shown at the user's line, as without the watcher.

A warning issued with ``stacklevel=2`` inside a wrapped function (``F.mse_loss``'s size warning,
the scheduler-before-optimizer warning of ``LRScheduler.step``) names its caller, which is now the
wrapper. ``warnings.showwarning`` (called only for a warning that is shown) is wrapped to put the
innermost user frame in its place. Warnings recorded by ``catch_warnings(record=True)`` still
carry the wrapper's line.
"""

from __future__ import annotations

import sys
import warnings
from typing import TYPE_CHECKING, Any

from trainguard.sanitize.core.frames import is_trainguard_file, user_frame
from trainguard.sanitize.probes.patch import Undo

if TYPE_CHECKING:
    from trainguard.sanitize.core.bus import Bus

__all__ = ["attach"]


def attach(bus: "Bus") -> list[Undo]:
    """Wrap ``warnings.showwarning``; returns the undo action (which leaves alone a
    ``showwarning`` that something else installed since)."""
    original = warnings.showwarning

    def showwarning(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
                    line: Any = None) -> None:
        try:
            if is_trainguard_file(filename):
                frame = user_frame(sys._getframe(1))
                if frame is not None:
                    filename, lineno, line = frame.f_code.co_filename, frame.f_lineno, None
        except Exception:  # never in the way of the warning itself
            pass
        return original(message, category, filename, lineno, file, line)

    warnings.showwarning = showwarning

    def restore() -> None:
        if warnings.showwarning is showwarning:
            warnings.showwarning = original
    return [restore]
