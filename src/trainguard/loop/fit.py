"""``fit``: train a model with the reference loop.

The loop itself is :func:`trainguard.loop.step.run_epoch`; this module is the public entry that
checks the arguments, sets the run up and drives it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Literal, Mapping, Sequence

import torch
from torch import nn

from trainguard.ckpt.seeding import seed_everything
from trainguard.loop.checkpointing import claim_run_dir
from trainguard.loop.device import resolve_device
from trainguard.loop.distributed import setup as setup_distributed
from trainguard.loop.history import History
from trainguard.loop.metrics import Metric
from trainguard.loop.options import FitOptions
from trainguard.loop.precision import Precision
from trainguard.loop.progress import ProgressMode
from trainguard.loop.setup import build_loop, run_context
from trainguard.loop.signals import TrainingInterrupted
from trainguard.loop.validation import evaluate

__all__ = ["fit", "evaluate", "TrainingInterrupted", "resolve_device"]


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
    callbacks: Sequence[Any] | None = None,
    loggers: Sequence[Any] = ("csv",),
    compile: bool | Mapping[str, Any] = False,
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
        accumulate_grad_batches: micro-batches per optimizer step (a final partial window steps
            too); losses are weighted by sample count, so the gradient equals the large batch's.
            Under DDP the window's other micro-batches run inside ``no_sync()``: one gradient
            all-reduce per optimizer step.
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
            ``docs/checkpoints.md``). A run with nothing left to train (every epoch done, or
            stopped by a callback) is loaded into ``model``, says so and writes nothing.
        force: resume even when the configuration differs from the checkpoint's; without
            ``resume``, start over in a ``run_dir`` that holds another run's checkpoints
            (they are deleted).
        progress: ``"auto"``, ``"bar"``, ``"plain"`` or ``"none"``.
        log_every_steps: interval in optimizer steps of the progress line and of the loggers'
            step values (each reads the loss: one host sync); 0: never.
        handle_signals: on SIGINT/SIGTERM finish the step, checkpoint and raise
            :class:`TrainingInterrupted` (main thread only).
        plot: draw ``curves.png`` at the end of the run (needs matplotlib).
        guard: run under the sanitizer (:func:`trainguard.watch`).
        config: plain values describing the run (stored in checkpoints and ``summary.json``;
            compared on resume).
        sync_batchnorm: under ``torchrun``, convert BatchNorm layers to ``SyncBatchNorm``
            (CUDA only) before wrapping the model in DDP.
        callbacks: objects with any of the hooks of :class:`trainguard.Callback`
            (``on_fit_start``, ``on_epoch_start``, ``on_step_end``, ``on_validation_end``,
            ``on_epoch_end``, ``on_fit_end``), called in order; e.g.
            :class:`trainguard.EarlyStopping`. One may end the run with
            ``state.request_stop(reason)``; one that raises stops the run with
            :class:`~trainguard.loop.callbacks.CallbackError`.
        loggers: where metrics go: ``"csv"`` (``metrics.csv``, the default) and
            ``"tensorboard"`` (event files in ``run_dir/tensorboard``; needs the ``tensorboard``
            package), or :class:`~trainguard.loop.loggers.Logger` objects. Rank 0 alone logs.
        compile: ``True`` (or a dict of ``torch.compile`` arguments, e.g. ``{"mode":
            "max-autotune"}``) runs the training and validation forwards through
            ``torch.compile``; on a compile failure the run goes on eagerly with one
            :class:`~trainguard.loop.compiling.CompileFallbackWarning`. Checkpoints hold the
            plain module's ``state_dict``, so compiled and eager runs resume each other.

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
        CallbackError: a callback raised; the message names it and the hook, the exception is
            chained, and the last checkpoint written before stays.

    Example::

        history = trainguard.fit(model, train_loader, val_loader,
                                 torch.optim.AdamW(model.parameters(), lr=1e-3),
                                 torch.nn.CrossEntropyLoss(), epochs=5, seed=0, run_dir="runs/a")
    """
    options = FitOptions.from_arguments(locals())
    ddp = setup_distributed(resolve_device(device))  # SINGLE without torchrun
    dev = ddp.device(resolve_device(device))
    options.check(model=model, optimizer=optimizer, loss_fn=loss_fn, device=dev)
    if run_dir is not None and resume is None:
        claim_run_dir(Path(run_dir), force=force, remove=ddp.is_main)
    if seed is not None:
        seed_everything(ddp.rank_seed(seed))
    loop = build_loop(model, train_loader, val_loader, optimizer, loss_fn, options, ddp, dev)
    with run_context(options) as signals:
        loop.signals = signals
        if resume is not None and loop.resume(resume, force=force):
            return loop.finished_history()  # nothing left to train: no file is touched
        return loop.run()
