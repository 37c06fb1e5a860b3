"""``History``: what ``fit`` returns, one row of metrics per epoch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["History"]


@dataclass
class History:
    """Per-epoch metrics of a run.

    Attributes:
        rows: one dict per finished epoch, with ``epoch`` (1-based), ``train_loss``, ``lr``,
            ``elapsed_s`` and, with a validation loader, ``val_loss``, ``val_accuracy`` (for class
            outputs) and ``val_<metric>`` for each metric given.
        best: ``{"monitor", "mode", "value", "epoch"}`` of the best epoch so far, or ``None``.
        weights_sha256: fingerprint of the final weights (:func:`trainguard.weights_sha256`).
        step: optimizer steps taken in the whole run.
        stopped_early: a callback (e.g. :class:`trainguard.EarlyStopping`) ended the run before
            its last epoch.
        stopped_epoch: the 1-based epoch the run stopped in, or ``None``.
        stop_reason: what the callback said, or ``None``.

    Example::

        history = trainguard.fit(...)
        history["val_accuracy"]      # list, one value per epoch
        history.rows[-1]["train_loss"]
    """

    rows: list[dict[str, float]] = field(default_factory=list)
    best: dict[str, Any] | None = None
    weights_sha256: str | None = None
    step: int = 0
    stopped_early: bool = False
    stopped_epoch: int | None = None
    stop_reason: str | None = None

    def __getitem__(self, key: str) -> list[float]:
        if not self.rows or key not in self.rows[-1]:
            known = sorted(self.rows[-1]) if self.rows else []
            raise KeyError(f"no metric {key!r} in the history (known: {known})")
        return [row.get(key, float("nan")) for row in self.rows]

    def __len__(self) -> int:
        return len(self.rows)

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "best": self.best, "weights_sha256": self.weights_sha256,
                "step": self.step, "stopped_early": self.stopped_early,
                "stopped_epoch": self.stopped_epoch, "stop_reason": self.stop_reason}
