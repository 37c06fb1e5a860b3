"""``fit``: the reference training and validation loop.

One optimizer step, in order (``_Trainer.train_group``):

1. ``optimizer.zero_grad(set_to_none=True)``
2. for each micro-batch of the accumulation group: forward (under autocast when asked), loss,
   loss scaled by the micro-batch's share of the group's samples, ``backward()``
3. ``scaler.unscale_`` (fp16 on CUDA), then gradient clipping
4. ``optimizer.step()`` (``scaler.step`` + ``scaler.update`` with fp16)
5. ``scheduler.step()`` when the scheduler is per step

The model is put in train mode at the start of every epoch and validation restores it. The loss is
logged through ``detach()`` into a device tensor: no graph is kept and there is no host sync per
step (the sums are read once per epoch, and every ``log_every_steps`` steps when progress shows).
Validation runs in ``model.eval()`` under ``torch.no_grad()`` and restores the previous mode.
"""

from __future__ import annotations

import contextlib
import math
import signal
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Literal, Mapping

import torch
from torch import nn

from trainguard.ckpt.checkpoint import (CheckpointManager, find_resume_checkpoint,
                                        load_model_state, model_state)
from trainguard.ckpt.fingerprint import weights_sha256
from trainguard.ckpt.io import load_verified
from trainguard.ckpt.rng import capture_rng, restore_rng
from trainguard.ckpt.seeding import seed_everything, set_deterministic
from trainguard.data.sampler import EpochBatchSampler
from trainguard.errors import CheckpointError, UsageError
from trainguard.loop.distributed import SINGLE, Distributed
from trainguard.loop.distributed import setup as setup_distributed
from trainguard.loop.history import History
from trainguard.loop.metrics import Metric, MetricSums
from trainguard.loop.progress import Progress, ProgressMode
from trainguard.loop.rundir import RunDir

__all__ = ["fit", "evaluate", "TrainingInterrupted", "resolve_device"]

Precision = Literal["32", "bf16", "fp16"]


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


def resolve_device(device: str | torch.device) -> torch.device:
    """``"auto"`` is CUDA when available, else CPU; other values as ``torch.device`` reads them.

    Raises:
        UsageError: an unknown device string, or CUDA asked for but not available.
    """
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise UsageError(f"--device {device!r} is not a device (use auto, cpu, cuda or "
                         f"cuda:N): {exc}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"--device {device} asked for CUDA, but torch.cuda.is_available() is "
                         f"False (torch {torch.__version__}); use --device cpu")
    return dev


def _to_device(obj: Any, device: torch.device) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.to(device, non_blocking=True)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_device(o, device) for o in obj)
    if isinstance(obj, dict):
        return {k: _to_device(v, device) for k, v in obj.items()}
    return obj


def _split_batch(batch: Any) -> tuple[Any, Any]:
    if isinstance(batch, (list, tuple)) and len(batch) == 2:
        return batch[0], batch[1]
    raise UsageError(f"fit expects each batch to be (inputs, targets), got "
                     f"{type(batch).__name__} of length "
                     f"{len(batch) if hasattr(batch, '__len__') else '?'}; wrap your dataset so "
                     "that __getitem__ returns (input, target)")


def _batch_size(targets: Any) -> int:
    if isinstance(targets, torch.Tensor) and targets.ndim > 0:
        return int(targets.shape[0])
    if isinstance(targets, (list, tuple)) and targets:
        return _batch_size(targets[0])
    return 1


def _autocast(device: torch.device, precision: Precision) -> Callable[[], Any]:
    if precision == "32":
        return contextlib.nullcontext
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return lambda: torch.autocast(device_type=device.type, dtype=dtype)


def evaluate(model: nn.Module, loader: Iterable, loss_fn: Callable[..., torch.Tensor], *,
             device: str | torch.device = "auto", metrics: Mapping[str, Metric] | None = None,
             precision: Precision = "32") -> dict[str, float]:
    """Validation metrics of ``model`` over ``loader`` in ``eval()`` mode under ``no_grad``.

    The model's previous mode is restored afterwards. Losses and metrics are averaged over samples
    (each batch weighted by its size; ``loss_fn`` should return a batch mean, PyTorch's default
    ``reduction="mean"``).

    Returns:
        ``{"loss": ..., "accuracy": ... (class outputs only), <metric>: ...}``.
    """
    return _evaluate_sums(model, loader, loss_fn, device=resolve_device(device),
                          metrics=metrics, precision=precision).means()


def _evaluate_sums(model: nn.Module, loader: Iterable, loss_fn: Callable[..., torch.Tensor], *,
                   device: torch.device, metrics: Mapping[str, Metric] | None,
                   precision: Precision) -> MetricSums:
    dev = device
    autocast = _autocast(dev, precision)
    was_training = model.training
    sums = MetricSums(metrics or {})
    model.eval()
    try:
        with torch.no_grad():
            for batch in loader:
                inputs, targets = _to_device(_split_batch(batch), dev)
                with autocast():
                    outputs = model(inputs)
                    loss = loss_fn(outputs, targets)
                sums.update(loss, outputs, targets)
    finally:
        model.train(was_training)
    return sums


class _Signals:
    """Turns SIGINT/SIGTERM into a flag the loop checks after each optimizer step; a second
    signal stops at once (the last good checkpoint stays)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "_Signals":
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


def _loader_generators(loader: Any) -> tuple[torch.Generator | None, torch.Generator | None]:
    """The DataLoader's generator (workers' base seed) and its sampler's, when they exist."""
    gen = getattr(loader, "generator", None)
    sampler_gen = getattr(getattr(loader, "sampler", None), "generator", None)
    return (gen if isinstance(gen, torch.Generator) else None,
            sampler_gen if isinstance(sampler_gen, torch.Generator) else None)


def _set_epoch(loader: Any, epoch: int) -> None:
    for holder in (getattr(loader, "batch_sampler", None), getattr(loader, "sampler", None)):
        if hasattr(holder, "set_epoch"):
            holder.set_epoch(epoch)


class _Trainer:
    """State of one ``fit`` call; ``train_group`` is the optimizer step."""

    def __init__(self, model, optimizer, loss_fn, *, device, precision, clip_grad_norm,
                 scheduler, scheduler_interval) -> None:
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.device = device
        self.autocast = _autocast(device, precision)
        use_scaler = precision == "fp16" and device.type == "cuda"
        self.scaler = torch.amp.GradScaler("cuda") if use_scaler else None
        self.clip_grad_norm = clip_grad_norm
        self.scheduler, self.scheduler_interval = scheduler, scheduler_interval
        self.step = 0
        self.loss_sum = torch.zeros((), device=device)
        self.samples = 0

    def train_group(self, group: list[tuple[Any, Any]]) -> None:
        """One optimizer step over an accumulation group of ``(inputs, targets)`` micro-batches.

        Each micro-batch loss (a batch mean) is weighted by its share of the group's samples, so
        the accumulated gradient equals that of one batch holding the whole group.
        """
        sizes = [_batch_size(targets) for _, targets in group]
        total = sum(sizes)
        self.optimizer.zero_grad(set_to_none=True)
        for (inputs, targets), n in zip(group, sizes):
            inputs = _to_device(inputs, self.device)
            targets = _to_device(targets, self.device)
            with self.autocast():
                outputs = self.model(inputs)
                loss = self.loss_fn(outputs, targets)
            scaled = loss if len(group) == 1 else loss * (n / total)
            (self.scaler.scale(scaled) if self.scaler else scaled).backward()
            self.loss_sum.add_(loss.detach(), alpha=n)  # no graph kept, no host sync
            self.samples += n
        if self.clip_grad_norm is not None:
            if self.scaler:
                self.scaler.unscale_(self.optimizer)  # clip the true gradients, not scaled ones
            nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_grad_norm)
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.step += 1
        if self.scheduler is not None and self.scheduler_interval == "step":
            self.scheduler.step()

    def epoch_loss(self) -> float:
        # note: a host sync, once per epoch
        return self.loss_sum.item() / self.samples if self.samples else float("nan")


def _groups(batches: Iterator[Any], size: int) -> Iterator[list[tuple[Any, Any]]]:
    group: list[tuple[Any, Any]] = []
    for batch in batches:
        group.append(_split_batch(batch))
        if len(group) == size:
            yield group
            group = []
    if group:
        yield group  # the last, partial group still steps, with its own sample weights


def _check_args(*, epochs, accumulate_grad_batches, clip_grad_norm, precision, device,
                scheduler_interval, checkpoint_every_steps, keep_last, run_dir, monitor_mode,
                optimizer, loss_fn, model) -> None:
    if not isinstance(model, nn.Module):
        raise UsageError(f"fit(model=...) must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise UsageError("fit(optimizer=...) must be a torch.optim.Optimizer, got "
                         f"{type(optimizer).__name__}; e.g. torch.optim.AdamW(model.parameters())")
    if not callable(loss_fn):
        raise UsageError("fit(loss_fn=...) must be callable(outputs, targets) -> loss tensor, "
                         "e.g. torch.nn.CrossEntropyLoss()")
    if not isinstance(epochs, int) or epochs < 1:
        raise UsageError(f"epochs must be an int >= 1, got {epochs!r}")
    if not isinstance(accumulate_grad_batches, int) or accumulate_grad_batches < 1:
        raise UsageError(f"accumulate_grad_batches must be an int >= 1, got "
                         f"{accumulate_grad_batches!r}")
    if clip_grad_norm is not None and not clip_grad_norm > 0:
        raise UsageError(f"clip_grad_norm must be > 0 or None, got {clip_grad_norm!r}")
    if precision not in ("32", "bf16", "fp16"):
        raise UsageError(f"precision must be '32', 'bf16' or 'fp16', got {precision!r}")
    if precision == "fp16" and device.type == "cpu":
        raise UsageError("precision='fp16' needs CUDA (GradScaler); use precision='bf16' on CPU")
    if scheduler_interval not in ("epoch", "step"):
        raise UsageError(f"scheduler_interval must be 'epoch' or 'step', got "
                         f"{scheduler_interval!r}")
    if checkpoint_every_steps is not None and checkpoint_every_steps < 1:
        raise UsageError(f"checkpoint_every_steps must be >= 1, got {checkpoint_every_steps}")
    if keep_last < 0:
        raise UsageError(f"keep_last must be >= 0, got {keep_last}")
    if (checkpoint_every_steps or keep_last) and run_dir is None:
        raise UsageError("checkpoint_every_steps/keep_last need a run_dir to write to")
    if monitor_mode not in ("auto", "min", "max"):
        raise UsageError(f"monitor_mode must be 'auto', 'min' or 'max', got {monitor_mode!r}")


def fit(
    model: nn.Module,
    train_loader: Iterable,
    val_loader: Iterable | None,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable[..., torch.Tensor],
    *,
    epochs: int = 1,
    device: str | torch.device = "auto",
    metrics: Mapping[str, Metric] | None = None,
    scheduler: Any = None,
    scheduler_interval: Literal["epoch", "step"] = "epoch",
    clip_grad_norm: float | None = None,
    accumulate_grad_batches: int = 1,
    precision: Precision = "32",
    seed: int | None = None,
    deterministic: bool = False,
    run_dir: str | Path | None = None,
    monitor: str = "val_loss",
    monitor_mode: Literal["auto", "min", "max"] = "auto",
    checkpoint_every_steps: int | None = None,
    keep_last: int = 0,
    resume: str | Path | None = None,
    force: bool = False,
    progress: ProgressMode = "auto",
    log_every_steps: int = 50,
    handle_signals: bool = False,
    plot: bool = True,
    guard: bool = False,
    config: Mapping[str, Any] | None = None,
    sync_batchnorm: bool = False,
) -> History:
    """Train ``model`` for ``epochs`` epochs and validate after each one.

    Args:
        model: the module to train; moved to ``device``.
        train_loader: yields ``(inputs, targets)`` batches; ``set_epoch(epoch)`` is called on
            its sampler/batch sampler when they have one (``DistributedSampler`` included).
        val_loader: validation batches, or ``None`` to skip validation.
        optimizer: built over ``model``'s parameters.
        loss_fn: ``loss_fn(outputs, targets)`` returning the batch-mean loss (scalar tensor).
        epochs: epochs in the whole run (a resumed run continues up to it).
        device: ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda"``, ``"cuda:N"``.
        metrics: extra validation metrics, ``{name: fn(outputs, targets) -> scalar}``, averaged
            over samples; accuracy is built in for ``(N, K)`` outputs with integer targets.
        scheduler: an LR scheduler, stepped once per epoch (``ReduceLROnPlateau`` gets the
            monitored value) or once per optimizer step (``scheduler_interval="step"``).
        clip_grad_norm: clip the global gradient norm to this value (after unscaling).
        accumulate_grad_batches: micro-batches per optimizer step (a final partial group steps
            too); losses are weighted by sample count, so the gradient equals the large batch's.
        precision: ``"32"``, ``"bf16"`` (autocast; CPU or CUDA) or ``"fp16"`` (autocast and
            ``GradScaler``; CUDA only).
        seed: seed every RNG first (:func:`trainguard.seed_everything`).
        deterministic: ask for deterministic kernels (:func:`set_deterministic`).
        run_dir: folder for ``metrics.csv``, ``summary.json``, ``curves.png``, ``train.log`` and
            checkpoints (``last.pt``, ``best.pt``); ``None`` writes nothing.
        monitor: history key that picks ``best.pt`` (``"val_loss"``, ``"val_accuracy"``, ...).
        monitor_mode: ``"min"``, ``"max"`` or ``"auto"`` (max for accuracy-like names).
        checkpoint_every_steps: also checkpoint every N optimizer steps mid-epoch.
        keep_last: keep the last K ``step-*.pt`` checkpoints.
        resume: a checkpoint file or run directory to continue from (bit-exact, see
            ``docs/checkpoints.md``).
        force: resume even when the configuration differs from the checkpoint's; without
            ``resume``, start over in a ``run_dir`` that holds another run's checkpoints
            (they are deleted).
        progress: ``"auto"``, ``"bar"``, ``"plain"`` or ``"none"``.
        log_every_steps: progress refresh interval in optimizer steps (each reads the loss:
            one host sync).
        handle_signals: on SIGINT/SIGTERM finish the step, checkpoint and raise
            :class:`TrainingInterrupted` (main thread only).
        plot: draw ``curves.png`` at the end of the run (needs matplotlib).
        guard: run under the sanitizer (:func:`trainguard.watch`).
        config: plain values describing the run (stored in checkpoints and ``summary.json``;
            compared on resume).
        sync_batchnorm: under ``torchrun``, convert BatchNorm layers to ``SyncBatchNorm``
            (CUDA only) before wrapping the model in DDP.

    Under ``torchrun`` (``WORLD_SIZE`` > 1) the process group is initialized from the launcher's
    environment (unless the script did it), the model is wrapped in
    ``DistributedDataParallel``, rank ``r`` > 0 is seeded with ``derive_seed(seed, r)``, the
    epoch's train loss and the validation metrics are reduced over all ranks, and rank 0 alone
    writes the run directory; see ``docs/distributed.md``. Shard ``train_loader`` with
    ``DistributedSampler`` or ``make_loader(..., num_replicas=, rank=)``.

    Returns:
        A :class:`History` with one row per epoch, the best epoch and the final
        ``weights_sha256``.

    Raises:
        UsageError: a bad argument (the message names it).
        CheckpointError: ``resume`` points at no usable checkpoint, or one of another model or
            configuration (without ``force``).
        TrainingInterrupted: a handled signal stopped the run.

    Example::

        history = trainguard.fit(model, train_loader, val_loader,
                                 torch.optim.AdamW(model.parameters(), lr=1e-3),
                                 torch.nn.CrossEntropyLoss(), epochs=5, seed=0, run_dir="runs/a")
    """
    ddp = setup_distributed(resolve_device(device))  # SINGLE without torchrun
    dev = ddp.device(resolve_device(device))
    _check_args(epochs=epochs, accumulate_grad_batches=accumulate_grad_batches,
                clip_grad_norm=clip_grad_norm, precision=precision, device=dev,
                scheduler_interval=scheduler_interval,
                checkpoint_every_steps=checkpoint_every_steps, keep_last=keep_last,
                run_dir=run_dir, monitor_mode=monitor_mode, optimizer=optimizer,
                loss_fn=loss_fn, model=model)
    if run_dir is not None and resume is None:
        _claim_run_dir(Path(run_dir), force=force, remove=ddp.is_main)
    if seed is not None:
        seed_everything(ddp.rank_seed(seed))
    model.to(dev)
    model = ddp.wrap(model, dev, sync_batchnorm=sync_batchnorm)
    ddp.check_sharded(train_loader)
    loop = _Loop(model, train_loader, val_loader, optimizer, loss_fn, device=dev, epochs=epochs,
                 metrics=metrics or {}, scheduler=scheduler, scheduler_interval=scheduler_interval,
                 clip_grad_norm=clip_grad_norm, accumulate=accumulate_grad_batches,
                 precision=precision, run_dir=run_dir, monitor=monitor,
                 monitor_mode=monitor_mode, checkpoint_every_steps=checkpoint_every_steps,
                 keep_last=keep_last, progress=Progress(progress, enabled=ddp.is_main),
                 log_every_steps=log_every_steps, config=dict(config or {}), seed=seed, plot=plot,
                 dist=ddp)
    guard_ctx: Any = contextlib.nullcontext()
    if guard:
        from trainguard.sanitize import watch

        guard_ctx = watch()
    with guard_ctx, _Signals(handle_signals) as signals, _deterministic(deterministic):
        if resume is not None:
            loop.resume(resume, force=force)
        return loop.run(signals)


def _claim_run_dir(run_dir: Path, *, force: bool, remove: bool) -> None:
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


@contextlib.contextmanager
def _deterministic(enabled: bool) -> Iterator[None]:
    """Deterministic kernels for the run, then the caller's settings back."""
    if not enabled:
        yield
        return
    before = (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.deterministic,
              torch.backends.cudnn.benchmark)
    set_deterministic(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0])
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = before[1:]


class _Loop:
    """The epoch driver around :class:`_Trainer`: data order, validation, checkpoints, files."""

    def __init__(self, model, train_loader, val_loader, optimizer, loss_fn, *, device, epochs,
                 metrics, scheduler, scheduler_interval, clip_grad_norm, accumulate, precision,
                 run_dir, monitor, monitor_mode, checkpoint_every_steps, keep_last, progress,
                 log_every_steps, config, seed, plot, dist: Distributed = SINGLE) -> None:
        self.model, self.train_loader, self.val_loader = model, train_loader, val_loader
        self.optimizer, self.loss_fn, self.metrics = optimizer, loss_fn, metrics
        self.device, self.epochs, self.accumulate, self.precision = device, epochs, accumulate, \
            precision
        self.trainer = _Trainer(model, optimizer, loss_fn, device=device, precision=precision,
                                clip_grad_norm=clip_grad_norm, scheduler=scheduler,
                                scheduler_interval=scheduler_interval)
        self.scheduler, self.scheduler_interval = scheduler, scheduler_interval
        self.monitor = monitor
        self.mode = monitor_mode if monitor_mode != "auto" else (
            "max" if any(w in monitor for w in ("acc", "f1", "auc", "precision", "recall"))
            else "min")
        self.checkpoint_every_steps, self.log_every_steps = checkpoint_every_steps, \
            log_every_steps
        self.progress, self.plot = progress, plot
        self.history = History()
        self.epoch, self.batches_done = 0, 0
        self.epoch_start_lr = float(optimizer.param_groups[0]["lr"])
        self.epoch_start_rng: dict[str, Any] | None = None
        self.resumed_rng: dict[str, Any] | None = None
        self.generators = _loader_generators(train_loader)
        self.dist = dist
        self.run_dir = RunDir(run_dir) if run_dir is not None and dist.is_main else None
        self.ckpt = CheckpointManager(run_dir, keep_last=keep_last) if run_dir is not None \
            else None
        self.config = {**config, **self._fit_config(seed)}
        if dist.enabled:
            self.config["world_size"] = dist.world_size

    # -- configuration stored in checkpoints and compared on resume
    def _fit_config(self, seed: int | None) -> dict[str, Any]:
        loader = self.train_loader
        n_batches = len(loader) if hasattr(loader, "__len__") else None
        dataset = getattr(loader, "dataset", None)
        return {"epochs": self.epochs, "accumulate_grad_batches": self.accumulate,
                "precision": self.precision, "seed": seed, "train_batches": n_batches,
                "train_samples": len(dataset) if hasattr(dataset, "__len__") else None,
                "batch_size": getattr(loader, "batch_size", None) or getattr(
                    getattr(loader, "batch_sampler", None), "batch_size", None)}

    # -- checkpoints
    def _payload(self, reason: str) -> dict[str, Any]:
        t = self.trainer
        return {
            "model": model_state(self.model),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
            "scaler": t.scaler.state_dict() if t.scaler is not None else None,
            "rng": capture_rng(*self.generators),
            "epoch_start_rng": self.epoch_start_rng,
            "epoch": self.epoch, "step": t.step, "batches_done": self.batches_done,
            "epoch_loss_sum": t.loss_sum.detach().cpu(), "epoch_samples": t.samples,
            "epoch_start_lr": self.epoch_start_lr,
            "history": list(self.history.rows), "best": self.history.best,
            "config": self.config, "reason": reason,
            "torch_version": str(torch.__version__),
        }

    def save(self, reason: str, *, is_best: bool = False) -> Path | None:
        if self.ckpt is None:
            return None
        payload = self.dist.add_rank_states(self._payload(reason))  # collective under DDP
        if not self.dist.is_main:
            self.dist.barrier()  # no rank exits before rank 0's file is in place
            return self.ckpt.folder / "last.pt"
        path = self.ckpt.save(payload, is_best=is_best, step_file=reason == "step")
        self.dist.barrier()
        self.run_dir.log(f"checkpoint {path.name} ({reason}) epoch={self.epoch} "
                         f"step={self.trainer.step} batches_done={self.batches_done}")
        return path

    def resume(self, source: str | Path, *, force: bool) -> None:
        source = Path(source)
        problems: list[str] = []
        if source.is_dir():
            path, payload, problems = find_resume_checkpoint(source)
        else:
            path, payload = source, load_verified(source)
        for problem in problems:
            self.progress.message(f"trainguard: skipped a damaged checkpoint: {problem}")
            if self.run_dir:
                self.run_dir.log(f"skipped damaged checkpoint: {problem}")
        if problems:
            self.progress.message(f"trainguard: resuming from {path} instead")
        self._check_config(payload["config"], force=force, path=path)
        payload = self.dist.own_rank_view(payload)
        load_model_state(self.model, payload["model"], source=str(path))
        self.optimizer.load_state_dict(payload["optimizer"])
        if self.scheduler is not None and payload["scheduler"] is not None:
            self.scheduler.load_state_dict(payload["scheduler"])
        if self.trainer.scaler is not None and payload["scaler"] is not None:
            self.trainer.scaler.load_state_dict(payload["scaler"])
        t = self.trainer
        t.step = int(payload["step"])
        self.epoch, self.batches_done = int(payload["epoch"]), int(payload["batches_done"])
        t.loss_sum = payload["epoch_loss_sum"].to(self.device).reshape(())
        t.samples = int(payload["epoch_samples"])
        self.epoch_start_lr = float(payload["epoch_start_lr"])
        self.history.rows = list(payload["history"])
        self.history.best = payload["best"]
        self.epoch_start_rng = payload["epoch_start_rng"]
        self.resumed_rng = payload["rng"]
        if self.run_dir:
            self.run_dir.log(f"resumed from {path} at epoch={self.epoch} step={t.step} "
                             f"batches_done={self.batches_done}")
        self.progress.message(f"trainguard: resumed from {path} (epoch {self.epoch + 1}, "
                              f"step {t.step}, batch {self.batches_done})")

    def _check_config(self, saved: dict[str, Any], *, force: bool, path: Path) -> None:
        ignore = {"device", "num_workers", "run_dir", "progress", "resume", "force"}
        diffs = [f"{k}: checkpoint {saved.get(k)!r}, now {self.config.get(k)!r}"
                 for k in sorted(set(saved) | set(self.config))
                 if k not in ignore and saved.get(k) != self.config.get(k)]
        if diffs and not force:
            raise CheckpointError(
                f"{path}: the run's configuration changed, so resuming would not continue the "
                f"same run ({'; '.join(diffs)}); resume with the original settings, or pass "
                "--force (force=True) to continue anyway")

    # -- the epoch driver
    def _train_batches(self) -> Iterator[Any]:
        """The current epoch's batches from ``batches_done`` on, with the same order and RNG
        stream as an uninterrupted run."""
        loader = self.train_loader
        _set_epoch(loader, self.epoch)
        if self.batches_done and self.epoch_start_rng is not None:
            # Replay the epoch's start: the iterator draws its shuffle and worker seeds from the
            # RNG state it had then; then skip what was trained and restore the RNG state of the
            # last completed step.
            restore_rng(self.epoch_start_rng, *self.generators)
            batch_sampler = getattr(loader, "batch_sampler", None)
            if isinstance(batch_sampler, EpochBatchSampler):
                batch_sampler.skip(self.batches_done)  # pure function of (seed, epoch): no reads
                it = iter(loader)
            else:
                it = iter(loader)
                for _ in range(self.batches_done):
                    next(it)
            restore_rng(self.resumed_rng, *self.generators)
            self.resumed_rng = None
            return it
        if self.resumed_rng is not None:  # resumed at an epoch boundary
            restore_rng(self.resumed_rng, *self.generators)
            self.resumed_rng = None
        self.epoch_start_rng = capture_rng(*self.generators)
        return iter(loader)

    def run(self, signals: _Signals) -> History:
        t = self.trainer
        rd = self.run_dir
        if self.ckpt is not None and self.dist.is_main:
            self.ckpt.remove_partial_files()
        if rd:
            rd.log(f"start epoch={self.epoch} step={t.step} device={self.device} "
                   f"config={self.config}")
        try:
            while self.epoch < self.epochs:
                self._run_epoch(signals)
        finally:
            self.progress.close()
        self.history.step = t.step
        self.dist.sync_buffers(self.model)
        self.history.weights_sha256 = weights_sha256(self.model)
        if rd:
            self._write_summary()
            rd.log(f"done step={t.step} weights_sha256={self.history.weights_sha256}")
            rd.close()
        return self.history

    def _run_epoch(self, signals: _Signals) -> None:
        t = self.trainer
        total = len(self.train_loader) if hasattr(self.train_loader, "__len__") else None
        if self.batches_done == 0:
            t.loss_sum.zero_()
            t.samples = 0
            self.epoch_start_lr = float(self.optimizer.param_groups[0]["lr"])
        self.model.train()
        self.progress.start_epoch(self.epoch, self.epochs, total, self.batches_done)
        start, start_samples = time.perf_counter(), t.samples
        for group in _groups(self._train_batches(), self.accumulate):
            t.train_group(group)
            self.batches_done += len(group)
            if self.progress.mode == "bar":
                self.progress.advance(self.batches_done)
            if self.log_every_steps and t.step % self.log_every_steps == 0 \
                    and self.progress.mode != "none":
                speed = (t.samples - start_samples) / max(time.perf_counter() - start, 1e-9)
                self.progress.update(self.batches_done, t.step, t.loss_sum.item() /
                                     max(t.samples, 1), speed)
            stop = self.dist.agreed_signal(signals.received)  # every rank stops at one step
            if stop is not None:
                path = self.save("signal")
                raise TrainingInterrupted(stop, path)
            if self.checkpoint_every_steps and t.step % self.checkpoint_every_steps == 0:
                self.save("step")
        row: dict[str, float] = {"epoch": self.epoch + 1,
                                 "train_loss": self.dist.mean(t.loss_sum, t.samples)}
        if self.val_loader is not None:
            self.dist.sync_buffers(self.model)
            sums = _evaluate_sums(self.dist.local_module(self.model), self.val_loader,
                                  self.loss_fn, device=self.device, metrics=self.metrics,
                                  precision=self.precision)
            val = self.dist.reduce_means(sums, self.device)
            row.update({f"val_{k}": v for k, v in val.items()})
        row["lr"] = self.epoch_start_lr  # the LR the epoch started with
        row["elapsed_s"] = round(time.perf_counter() - start, 3)
        if self.scheduler is not None and self.scheduler_interval == "epoch":
            self._step_epoch_scheduler(row)
        self.history.rows.append(row)
        is_best = self._update_best(row)
        self.epoch += 1
        self.batches_done = 0
        self.epoch_start_rng = None
        t.loss_sum.zero_()
        t.samples = 0
        self.progress.end_epoch(row)
        if self.run_dir:
            self.run_dir.write_metrics(self.history.rows)
            self.run_dir.log("epoch " + " ".join(f"{k}={v:.6g}" for k, v in row.items()))
        self.save("epoch", is_best=is_best)
        stop = self.dist.agreed_signal(signals.received)
        if stop is not None:
            raise TrainingInterrupted(stop, self.ckpt.folder / "last.pt" if self.ckpt else None)

    def _step_epoch_scheduler(self, row: dict[str, float]) -> None:
        with warnings.catch_warnings():
            if self.trainer.step > 0:
                # Resumed at the end of an epoch, the new process has not called
                # optimizer.step() yet, and PyTorch's order check would misfire: the optimizer
                # did step (trainer.step > 0), in the process that wrote the checkpoint.
                warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler")
            if isinstance(self.scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
                self.scheduler.step(row.get(self.monitor, row["train_loss"]))
            else:
                self.scheduler.step()

    def _update_best(self, row: dict[str, float]) -> bool:
        value = row.get(self.monitor)
        if value is None or math.isnan(value):
            return False
        best = self.history.best
        better = best is None or (value < best["value"] if self.mode == "min"
                                  else value > best["value"])
        if better:
            self.history.best = {"monitor": self.monitor, "mode": self.mode, "value": value,
                                 "epoch": int(row["epoch"])}
        return better

    def _write_summary(self) -> None:
        rows = self.history.rows
        accs = [r["val_accuracy"] for r in rows if "val_accuracy" in r]
        summary = {
            "epochs": self.epochs,
            "steps": self.trainer.step,
            "seed": self.config.get("seed"),
            "best_val_accuracy": max(accs) if accs else None,
            "final": rows[-1] if rows else None,
            "best": self.history.best,
            "weights_sha256": self.history.weights_sha256,
            "device": str(self.device),
            "torch_version": str(torch.__version__),
            "config": self.config,
        }
        self.run_dir.write_summary(summary)
        if self.plot:
            self.run_dir.plot(rows)
