"""SIGINT/SIGTERM during training: finish the optimizer step, checkpoint, then stop."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

__all__ = ["TrainingInterrupted", "Signals"]


class TrainingInterrupted(Exception):
    """Raised by :func:`fit` after SIGINT/SIGTERM once the current optimizer step is finished and
    a checkpoint is written (only with ``handle_signals=True``).

    Attributes:
        signum: the signal number; exit with ``128 + signum``.
        checkpoint: the checkpoint written, or ``None`` without a run directory.
    """

    def __init__(self, signum: int, checkpoint: Path | None) -> None:
        name = signal.Signals(signum).name
        where = f"; resume with: trainguard train --resume {checkpoint.parent}" \
            if checkpoint is not None else ""
        super().__init__(f"stopped by {name} after a completed optimizer step{where}")
        self.signum, self.checkpoint = signum, checkpoint


class Signals:
    """Turns SIGINT/SIGTERM into a flag the loop checks after each optimizer step; a second
    signal stops at once (the last good checkpoint stays)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "Signals":
        if self.enabled:
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.received is not None:
            self.__exit__()
            raise KeyboardInterrupt if signum == signal.SIGINT else SystemExit(128 + signum)
        self.received = signum

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
