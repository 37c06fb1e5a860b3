"""The run checkpoint: what it holds, where it is kept, and how a run resumes from it.

A checkpoint is a ``torch.save`` dict of plain values and tensors (see ``docs/checkpoints.md``)::

    format, format_version      "trainguard-checkpoint", 1
    model                       model.state_dict() (wrapper prefixes removed)
    optimizer, scheduler, scaler  their state_dict(), or None
    rng                         RNG states after the last completed optimizer step
    epoch_start_rng             RNG states when the current epoch's data iterator was created
    epoch                       0-based epoch in progress (== epochs when finished)
    step                        optimizer steps completed in the whole run
    batches_done                batches of the current epoch already trained on
    history                     list of per-epoch metric dicts
    best                        {"monitor", "mode", "value", "epoch"}
    config                      the run's configuration (plain values)
    reason                      "epoch", "step", "signal" or "final"
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from trainguard.ckpt.fingerprint import strip_wrapper_prefixes
from trainguard.ckpt.io import (FORMAT, FORMAT_VERSION, atomic_link, atomic_save, fsync_folder,
                                load_verified)
from trainguard.errors import CheckpointError

__all__ = ["load_checkpoint", "CheckpointManager", "find_resume_checkpoint",
           "load_model_state", "unwrap"]

_STEP_FILE = re.compile(r"^step-(\d+)\.pt$")


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The module inside DDP (``.module``) and ``torch.compile`` (``._orig_mod``) wrappers."""
    while True:
        inner = getattr(model, "_orig_mod", None) or (
            model.module if isinstance(getattr(model, "module", None), torch.nn.Module)
            and type(model).__name__ in {"DistributedDataParallel", "DataParallel"} else None)
        if inner is None:
            return model
        model = inner


def model_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """``state_dict`` with wrapper prefixes removed, so DDP/compiled runs share checkpoints."""
    return {strip_wrapper_prefixes(k): v for k, v in unwrap(model).state_dict().items()}


def load_model_state(model: torch.nn.Module, state: dict[str, torch.Tensor], *,
                     source: str = "checkpoint") -> None:
    """Load ``state`` into ``model`` strictly, or explain every mismatched key.

    Raises:
        CheckpointError: keys missing or unexpected, or shapes that differ; the message lists
            them with both shapes (e.g. a checkpoint of another model size).
    """
    target = unwrap(model)
    expected = {k: v for k, v in target.state_dict().items()}
    given = {strip_wrapper_prefixes(k): v for k, v in state.items()}
    missing = sorted(set(expected) - set(given))
    unexpected = sorted(set(given) - set(expected))
    shapes = sorted(f"{k}: checkpoint {tuple(given[k].shape)} vs model {tuple(expected[k].shape)}"
                    for k in set(given) & set(expected) if given[k].shape != expected[k].shape)
    if missing or unexpected or shapes:
        parts = []
        if shapes:
            parts.append("shape mismatch: " + "; ".join(shapes))
        if missing:
            parts.append(f"missing from the checkpoint: {', '.join(missing)}")
        if unexpected:
            parts.append(f"not in the model: {', '.join(unexpected)}")
        raise CheckpointError(f"{source} does not fit this model ({' | '.join(parts)}); was it "
                              "saved from another architecture or size?")
    target.load_state_dict(given, strict=True)


def load_checkpoint(path: str | Path, *, map_location: str | torch.device = "cpu"
                    ) -> dict[str, Any]:
    """Load a trainguard checkpoint for your own loop, verified and without unpickling code.

    Args:
        path: a ``.pt`` file written by trainguard, or a run directory (its newest good
            checkpoint is taken, see :func:`find_resume_checkpoint`).
        map_location: where tensors are loaded (default CPU).

    Returns:
        The checkpoint dict (keys in the module docstring), e.g.
        ``model.load_state_dict(ckpt["model"])``, ``optimizer.load_state_dict(ckpt["optimizer"])``.

    Raises:
        CheckpointError: missing, damaged, unsafe or not a trainguard checkpoint.

    Example::

        ckpt = trainguard.load_checkpoint("runs/digits/last.pt")
        model.load_state_dict(ckpt["model"])
    """
    path = Path(path)
    if path.is_dir():
        path, _, _ = find_resume_checkpoint(path)
    return load_verified(path, map_location=map_location)


def find_resume_checkpoint(run_dir: str | Path
                           ) -> tuple[Path, dict[str, Any], list[str]]:
    """The newest checkpoint in ``run_dir`` that verifies and loads.

    Candidates are ``last.pt``, ``step-*.pt`` and ``best.pt``; the newest is the one with the most
    optimizer steps. Damaged ones are skipped.

    Returns:
        ``(path, checkpoint, problems)``: ``problems`` describes each damaged candidate that was
        skipped.

    Raises:
        CheckpointError: the folder holds no checkpoint that loads.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise CheckpointError(f"run directory not found: {run_dir}")
    candidates = [run_dir / "last.pt", run_dir / "best.pt"]
    candidates += sorted(p for p in run_dir.glob("step-*.pt") if _STEP_FILE.match(p.name))
    best: tuple[tuple[int, int, int], Path, dict[str, Any]] | None = None
    problems: list[str] = []
    for path in candidates:
        if not path.exists():
            continue
        try:
            payload = load_verified(path)
        except CheckpointError as exc:
            problems.append(str(exc))
            continue
        key = (int(payload["step"]), int(payload["epoch"]), int(payload["batches_done"]))
        if best is None or key > best[0]:
            best = (key, path, payload)
    if best is None:
        detail = "; ".join(problems) if problems else "no last.pt, best.pt or step-*.pt"
        raise CheckpointError(f"{run_dir}: no usable checkpoint to resume from ({detail})")
    return best[1], best[2], problems


class CheckpointManager:
    """Writes ``last.pt``, ``best.pt`` and, with ``keep_last > 0``, ``step-<step>.pt`` files.

    Args:
        folder: the run directory.
        keep_last: how many ``step-*.pt`` files to keep (0 keeps none).
    """

    def __init__(self, folder: str | Path, *, keep_last: int = 0) -> None:
        if keep_last < 0:
            raise ValueError(f"keep_last must be >= 0, got {keep_last}")
        self.folder = Path(folder)
        self.keep_last = keep_last

    def save(self, payload: dict[str, Any], *, is_best: bool = False,
             step_file: bool = False) -> Path:
        """Write ``payload`` as ``last.pt`` (and ``best.pt``/``step-N.pt``), each atomically.

        ``last.pt`` is replaced only by a complete file, and the older ``step-*.pt`` files are
        pruned only after the new one is in place, so no completed checkpoint is lost.
        """
        payload = {"format": FORMAT, "format_version": FORMAT_VERSION, **payload}
        last = atomic_save(payload, self.folder / "last.pt", fsync_dir=False)
        if is_best:
            atomic_link(last, self.folder / "best.pt", fsync_dir=False)
        if step_file and self.keep_last > 0:
            atomic_link(last, self.folder / f"step-{int(payload['step']):09d}.pt",
                        fsync_dir=False)
        fsync_folder(self.folder)  # once, for every rename above
        if step_file and self.keep_last > 0:
            self._prune()  # only once the new names are durable
        return last

    def remove_partial_files(self) -> list[Path]:
        """Delete temporary files a killed writer left behind (``.<name>.tmp-<pid>``, never a
        finished file)."""
        leftovers = [p for p in self.folder.glob(".*.tmp-*") if p.is_file()]
        for p in leftovers:
            p.unlink(missing_ok=True)
        return leftovers

    def _prune(self) -> None:
        steps = sorted(p for p in self.folder.glob("step-*.pt") if _STEP_FILE.match(p.name))
        for old in steps[: max(0, len(steps) - self.keep_last)]:
            old.unlink(missing_ok=True)
