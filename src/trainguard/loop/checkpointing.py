"""What a run writes into its checkpoints, and how it reads them back on resume.

The functions take the run's :class:`~trainguard.loop.driver.Loop`; the file format itself is in
:mod:`trainguard.ckpt.checkpoint` (``docs/checkpoints.md``).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch

from trainguard.ckpt.checkpoint import find_resume_checkpoint, load_model_state, model_state
from trainguard.ckpt.io import load_verified
from trainguard.ckpt.rng import capture_rng
from trainguard.errors import CheckpointError

__all__ = ["fit_config", "data_description", "save", "resume", "claim_run_dir"]

# fit's own configuration keys that may change on resume (where and how, not what, is trained).
_FREE = {"device", "num_workers", "run_dir", "progress", "resume", "force"}


def fit_config(loader: Any, *, epochs: int, accumulate: int, precision: str,
               seed: int | None) -> dict[str, Any]:
    """The settings that make a run what it is, stored in checkpoints and compared on resume."""
    n_batches = len(loader) if hasattr(loader, "__len__") else None
    dataset = getattr(loader, "dataset", None)
    return {"epochs": epochs, "accumulate_grad_batches": accumulate, "precision": precision,
            "seed": seed, "train_batches": n_batches,
            "train_samples": len(dataset) if hasattr(dataset, "__len__") else None,
            "batch_size": getattr(loader, "batch_size", None) or getattr(
                getattr(loader, "batch_sampler", None), "batch_size", None)}


def data_description(loader: Any) -> dict[str, Any] | None:
    """What a prediction needs to know of the training data: ``classes`` (index to name, from a
    dataset's ``classes`` attribute, as torchvision's ``ImageFolder`` and trainguard's datasets
    have) and, for trainguard's image datasets, ``input_shape`` ``[C, H, W]`` and the
    ``normalization`` (``mean`` and ``std`` per channel of pixels scaled to ``[0, 1]``)."""
    dataset = getattr(loader, "dataset", None)
    while dataset is not None and not hasattr(dataset, "classes") \
            and hasattr(dataset, "dataset"):  # torch.utils.data.Subset and similar wrappers
        dataset = dataset.dataset
    describe = getattr(dataset, "describe", None)
    if callable(describe):
        return describe()
    classes = getattr(dataset, "classes", None)
    if isinstance(classes, (list, tuple)) and all(isinstance(c, str) for c in classes):
        return {"classes": list(classes)}
    return None


def _payload(loop: Any, reason: str) -> dict[str, Any]:
    s = loop.state
    return {
        "model": model_state(loop.model),
        "optimizer": loop.optimizer.state_dict(),
        "scheduler": loop.scheduler.state_dict() if loop.scheduler is not None else None,
        "scaler": loop.amp.scaler.state_dict() if loop.amp.scaler is not None else None,
        "rng": capture_rng(*loop.generators),
        "epoch_start_rng": loop.epoch_start_rng,
        "epoch": s.epoch, "step": s.step, "batches_done": s.batches_done,
        "epoch_loss_sum": s.loss_sum.detach().cpu(), "epoch_samples": s.samples,
        "epoch_start_lr": s.epoch_start_lr, "epoch_elapsed_s": loop.epoch_elapsed_s(),
        "history": list(s.history.rows), "best": s.history.best,
        "stopped": {"epoch": s.stopped_epoch, "reason": s.stop_reason}
        if s.stopped_epoch is not None else None,
        "callbacks": loop.callbacks.state_dict(),
        "data": loop.data_info,
        "config": loop.config, "reason": reason,
        "torch_version": str(torch.__version__),
    }


def save(loop: Any, reason: str, *, is_best: bool = False) -> Path | None:
    """Write ``last.pt`` (and ``best.pt``/``step-N.pt``); every rank calls it (under DDP the
    ranks' RNG states are gathered to rank 0, which alone writes)."""
    if loop.ckpt is None:
        return None
    payload = loop.dist.add_rank_states(_payload(loop, reason))  # collective under DDP
    if not loop.dist.is_main:
        loop.dist.barrier()  # no rank exits before rank 0's file is in place
        return loop.ckpt.folder / "last.pt"
    path = loop.ckpt.save(payload, is_best=is_best, step_file=reason == "step")
    loop.dist.barrier()
    s = loop.state
    loop.run_dir.log(f"checkpoint {path.name} ({reason}) epoch={s.epoch} step={s.step} "
                     f"batches_done={s.batches_done}")
    return path


def _load(loop: Any, source: Path) -> tuple[Path, dict[str, Any]]:
    problems: list[str] = []
    if source.is_dir():
        path, payload, problems = find_resume_checkpoint(source)
    else:
        path, payload = source, load_verified(source)
    for problem in problems:
        loop.progress.message(f"trainguard: skipped a damaged checkpoint: {problem}")
        if loop.run_dir:
            loop.run_dir.log(f"skipped damaged checkpoint: {problem}")
    if problems:
        loop.progress.message(f"trainguard: resuming from {path} instead")
    return path, payload


def resume(loop: Any, source: str | Path, *, force: bool) -> Path:
    """Restore the run from a checkpoint file or the newest good one in a run directory.

    Raises:
        CheckpointError: no usable checkpoint, another model, or (without ``force``) another
            configuration.
    """
    path, payload = _load(loop, Path(source))
    check_config(payload["config"], loop.config, force=force, path=path)
    payload = loop.dist.own_rank_view(payload)
    load_model_state(loop.model, payload["model"], source=str(path))
    loop.optimizer.load_state_dict(payload["optimizer"])
    if loop.scheduler is not None and payload["scheduler"] is not None:
        loop.scheduler.load_state_dict(payload["scheduler"])
    if loop.amp.scaler is not None and payload["scaler"] is not None:
        loop.amp.scaler.load_state_dict(payload["scaler"])
    loop.callbacks.load_state_dict(payload.get("callbacks") or {})
    s = loop.state
    s.step, s.epoch, s.batches_done = (int(payload[k]) for k in ("step", "epoch", "batches_done"))
    s.loss_sum = payload["epoch_loss_sum"].to(loop.device).reshape(())
    s.samples = int(payload["epoch_samples"])
    s.epoch_start_lr = float(payload["epoch_start_lr"])
    s.epoch_elapsed_s = float(payload.get("epoch_elapsed_s", 0.0))
    s.history.rows, s.history.best = list(payload["history"]), payload["best"]
    stopped = payload.get("stopped")
    if stopped is not None:
        s.stopped_epoch, s.stop_reason = int(stopped["epoch"]), stopped["reason"]
    loop.epoch_start_rng, loop.resumed_rng = payload["epoch_start_rng"], payload["rng"]
    return path


def check_config(saved: dict[str, Any], current: dict[str, Any], *, force: bool,
                 path: Path) -> None:
    """Refuse a checkpoint written with other settings, listing each difference.

    Raises:
        CheckpointError: a setting differs and ``force`` is False.
    """
    diffs = [f"{k}: checkpoint {saved.get(k)!r}, now {current.get(k)!r}"
             for k in sorted(set(saved) | set(current))
             if k not in _FREE and saved.get(k) != current.get(k)]
    if diffs and not force:
        raise CheckpointError(
            f"{path}: the run's configuration changed, so resuming would not continue the "
            f"same run ({'; '.join(diffs)}); resume with the original settings, or pass "
            "--force (force=True) to continue anyway")


def claim_run_dir(run_dir: Path, *, force: bool, remove: bool) -> None:
    """Refuse to start a new run over another run's checkpoints, or, with ``force``, clear them
    (and its metrics) so that no stale checkpoint can be resumed later.

    Raises:
        CheckpointError: ``run_dir`` holds checkpoints and ``force`` is False.
    """
    old = sorted(p.name for p in run_dir.glob("*.pt")) if run_dir.is_dir() else []
    if not old:
        return
    if not force:
        raise CheckpointError(
            f"{run_dir} already holds a run ({', '.join(old[:4])}{', ...' if len(old) > 4 else ''}"
            f"); continue it with --resume {run_dir} (resume=...), choose another --run-dir, or "
            "pass --force (force=True) to start over there, which deletes its checkpoints")
    if remove:
        for name in [*old, "metrics.csv", "summary.json", "curves.png"]:
            (run_dir / name).unlink(missing_ok=True)
        shutil.rmtree(run_dir / "tensorboard", ignore_errors=True)
