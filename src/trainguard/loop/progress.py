"""Live progress: a rich progress bar on a terminal, plain lines in logs and CI."""

from __future__ import annotations

import sys
import time
from typing import Literal, TextIO

__all__ = ["Progress", "ProgressMode"]

ProgressMode = Literal["auto", "bar", "plain", "none"]


class Progress:
    """Reports epoch, step, loss, metrics and speed.

    Args:
        mode: ``"bar"`` (rich, redrawn in place), ``"plain"`` (one line per epoch and every
            ``log_every_steps`` optimizer steps), ``"none"``, or ``"auto"``: bar on a terminal,
            plain otherwise (CI logs).
        stream: where to write (default stderr).
    """

    def __init__(self, mode: ProgressMode = "auto", *, stream: TextIO | None = None,
                 enabled: bool = True) -> None:
        self.stream = stream or sys.stderr
        if mode == "auto":
            mode = "bar" if getattr(self.stream, "isatty", lambda: False)() else "plain"
        self.mode = mode if enabled else "none"
        self._bar = None
        self._task = None
        self._t0 = 0.0

    def start_epoch(self, epoch: int, epochs: int, total_batches: int | None,
                    done: int = 0) -> None:
        self._t0 = time.perf_counter()
        self._epoch, self._epochs = epoch, epochs
        if self.mode == "bar":
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress as RichProgress,
                                       TextColumn, TimeRemainingColumn)
            from rich.console import Console

            self._bar = RichProgress(
                TextColumn(f"epoch {epoch + 1}/{epochs}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[info]}"), TimeRemainingColumn(),
                console=Console(file=self.stream), transient=True)
            self._bar.start()
            self._task = self._bar.add_task("train", total=total_batches, completed=done, info="")

    def advance(self, batches_done: int) -> None:
        """Move the bar (no loss read, so no host sync); plain lines wait for :meth:`update`."""
        if self._bar is not None:
            self._bar.update(self._task, completed=batches_done)

    def update(self, batches_done: int, step: int, loss: float | None,
               samples_per_s: float) -> None:
        info = f"step {step}  {samples_per_s:,.0f} samples/s"
        if loss is not None:
            info = f"loss {loss:.4f}  " + info
        if self.mode == "bar" and self._bar is not None:
            self._bar.update(self._task, completed=batches_done, info=info)
        elif self.mode == "plain":
            print(f"epoch {self._epoch + 1}/{self._epochs} batch {batches_done}: {info}",
                  file=self.stream, flush=True)

    def end_epoch(self, row: dict[str, float]) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        if self.mode == "none":
            return
        shown = "  ".join(f"{k} {v:.4g}" for k, v in row.items()
                          if k not in {"epoch", "elapsed_s"})
        print(f"epoch {int(row['epoch'])}/{self._epochs}  {shown}  "
              f"({row.get('elapsed_s', 0.0):.1f}s)", file=self.stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def message(self, text: str) -> None:
        """A line that must be seen (resume notes, skipped damaged files), whatever the mode."""
        print(text, file=self.stream, flush=True)
