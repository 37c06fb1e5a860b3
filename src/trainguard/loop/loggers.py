"""Where metrics go: ``metrics.csv`` (always, by default) and TensorBoard event files.

A logger is an object with ``log_epoch(step, row, rows)`` and, optionally,
``log_step(step, values)`` and ``close()`` (see :class:`Logger`); ``fit(loggers=[...])`` takes the names ``"csv"`` and ``"tensorboard"`` or such
objects. Loggers run on rank 0 only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from trainguard.errors import UsageError
from trainguard.loop.rundir import RunDir

__all__ = ["Logger", "CSVLogger", "TensorBoardLogger", "make_loggers", "check_loggers"]

TENSORBOARD_HINT = ("pip install 'trainguard[tensorboard]' (or: pip install tensorboard)")


class Logger:
    """Base class: every method does nothing."""

    def log_step(self, step: int, values: dict[str, float]) -> None:
        """Every ``log_every_steps`` optimizer steps: ``train_loss_step`` (that step's loss) and
        ``lr_step`` (the first parameter group's learning rate after the step)."""

    def log_epoch(self, step: int, row: dict[str, float], rows: list[dict[str, float]]) -> None:
        """After each epoch: its ``metrics.csv`` row, at optimizer step ``step``, and every row
        so far (``rows[-1] is row``)."""

    def close(self) -> None:
        """At the end of the run, also an interrupted one."""


class CSVLogger(Logger):
    """``metrics.csv`` in the run directory: written whole, atomically, at this process's first
    epoch (after a resume it may hold rows of epochs past the checkpoint) and whenever the
    columns change; otherwise each epoch appends its row."""

    def __init__(self, run_dir: RunDir) -> None:
        self.run_dir = run_dir
        self._columns: list[str] | None = None
        self._written = 0

    def log_epoch(self, step: int, row: dict[str, float], rows: list[dict[str, float]]) -> None:
        columns = self.run_dir.metric_columns(rows)
        if columns == self._columns and self._written == len(rows) - 1:
            self.run_dir.append_metrics(row, columns)
        else:
            self.run_dir.write_metrics(rows)
        self._columns, self._written = columns, len(rows)


class TensorBoardLogger(Logger):
    """TensorBoard event files in ``<run_dir>/tensorboard`` through ``torch.utils.tensorboard``.

    Every value is a scalar whose x-axis is the optimizer step: ``train_loss_step`` and
    ``lr_step`` every ``log_every_steps`` steps; each ``metrics.csv`` column (``train_loss``,
    ``val_loss``, ``val_accuracy``, ``lr``, ``epoch``, ...) at the step that ended the epoch. A
    resumed run passes ``purge_step`` so that TensorBoard drops what the interrupted process
    logged after its checkpoint (https://pytorch.org/docs/stable/tensorboard.html).

    Raises:
        UsageError: the ``tensorboard`` package is not installed (exit 2).
    """

    def __init__(self, folder: Path, *, purge_step: int | None = None) -> None:
        writer_class = tensorboard_writer()
        self.writer = writer_class(log_dir=str(folder), purge_step=purge_step)

    def log_step(self, step: int, values: dict[str, float]) -> None:
        for key, value in values.items():
            self.writer.add_scalar(key, value, global_step=step)

    def log_epoch(self, step: int, row: dict[str, float], rows: list[dict[str, float]]) -> None:
        for key, value in row.items():
            if key != "elapsed_s":
                self.writer.add_scalar(key, value, global_step=step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class _Given(Logger):
    """A logger object of the user's: the methods it lacks do nothing."""

    def __init__(self, logger: Any) -> None:
        for name in ("log_step", "log_epoch", "close"):
            if callable(getattr(logger, name, None)):
                setattr(self, name, getattr(logger, name))


def tensorboard_writer() -> Any:
    """``torch.utils.tensorboard.SummaryWriter``.

    Raises:
        UsageError: the ``tensorboard`` package is missing; the message says what to install.
    """
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as exc:
        raise UsageError(f"TensorBoard logging needs the tensorboard package, which is not "
                         f"installed ({exc}); {TENSORBOARD_HINT}") from None
    return SummaryWriter


def check_loggers(loggers: Any) -> list[Any]:
    """``loggers`` as a list of ``"csv"``, ``"tensorboard"`` or logger objects; with
    ``"tensorboard"``, fails now (before training) when the package is missing.

    Raises:
        UsageError: an unknown name, or ``"tensorboard"`` without its package.
    """
    if isinstance(loggers, str) or not isinstance(loggers, (list, tuple)):
        raise UsageError(f"fit(loggers=...) must be a list such as ['csv', 'tensorboard'], got "
                         f"{loggers!r}")
    for item in loggers:
        if isinstance(item, str) and item not in ("csv", "tensorboard"):
            raise UsageError(f"fit(loggers=[{item!r}]): unknown logger; use 'csv', "
                             "'tensorboard' or a trainguard.loop.loggers.Logger")
        if not isinstance(item, str) and not callable(getattr(item, "log_epoch", None)):
            raise UsageError(f"fit(loggers=[...]): {item!r} has no log_epoch method")
    if "tensorboard" in loggers:
        tensorboard_writer()
    return list(loggers)


def make_loggers(names: Sequence[Any], run_dir: RunDir | None, *,
                 resumed_step: int | None) -> list[Logger]:
    """The loggers of a run; the file loggers only with a run directory (rank 0)."""
    out: list[Logger] = []
    for item in names:
        if not isinstance(item, str):
            out.append(_Given(item))
        elif run_dir is None:
            continue
        elif item == "csv":
            out.append(CSVLogger(run_dir))
        else:
            purge = resumed_step + 1 if resumed_step is not None else None
            out.append(TensorBoardLogger(run_dir.path / "tensorboard", purge_step=purge))
    return out
