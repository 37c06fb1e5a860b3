"""Set-up of one ``fit`` call: the model on its device (DDP, ``torch.compile``), the run's parts
assembled into a :class:`~trainguard.loop.driver.Loop`, and the context the run executes in."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator

import torch
from torch import nn

from trainguard.ckpt.checkpoint import CheckpointManager, unwrap
from trainguard.ckpt.seeding import set_deterministic
from trainguard.loop.batches import loader_generators
from trainguard.loop.callbacks import Callbacks, monitor_mode
from trainguard.loop.checkpointing import data_description, fit_config
from trainguard.loop.compiling import CompiledForward, compile_context, compile_options
from trainguard.loop.ddp import Distributed
from trainguard.loop.driver import Loop
from trainguard.loop.options import FitOptions
from trainguard.loop.precision import Amp
from trainguard.loop.progress import Progress
from trainguard.loop.rundir import RunDir
from trainguard.loop.signals import Signals
from trainguard.loop.state import LoopState, LoopView

__all__ = ["build_loop", "run_context"]


def _forwards(model: nn.Module, dist: Distributed, options: FitOptions) -> tuple[Any, Any]:
    """The callables the training and the validation forward go through."""
    local = dist.local_module(model)  # validation never runs DDP's forward (see local_module)
    compiling = compile_options(options.compile)
    if compiling is None:
        return model, local
    train = CompiledForward(model, compiling)
    return train, CompiledForward(local, compiling, train.fallback)


def build_loop(model: nn.Module, train_loader: Any, val_loader: Any,
               optimizer: torch.optim.Optimizer, loss_fn: Any, options: FitOptions,
               dist: Distributed, device: torch.device) -> Loop:
    """Move and wrap the model, then assemble the run's :class:`Loop`."""
    model.to(device)
    model = dist.wrap(model, device, sync_batchnorm=options.sync_batchnorm)
    dist.check_sharded(train_loader)
    train_forward, eval_forward = _forwards(model, dist, options)
    run_dir = options.run_dir
    state = LoopState(loss_sum=torch.zeros((), device=device),
                      epoch_start_lr=float(optimizer.param_groups[0]["lr"]))
    config = {**(options.config or {}),
              **fit_config(train_loader, epochs=options.epochs,
                           accumulate=options.accumulate_grad_batches,
                           precision=options.precision, seed=options.seed)}
    if dist.enabled:
        config["world_size"] = dist.world_size
    callbacks = list(options.callbacks or [])
    return Loop(
        model=model, train_forward=train_forward, eval_forward=eval_forward,
        train_loader=train_loader, val_loader=val_loader, optimizer=optimizer, loss_fn=loss_fn,
        device=device, epochs=options.epochs, metrics=dict(options.metrics or {}),
        scheduler=options.scheduler, scheduler_interval=options.scheduler_interval,
        clip_grad_norm=options.clip_grad_norm, accumulate=options.accumulate_grad_batches,
        precision=options.precision, amp=Amp(device, options.precision), state=state,
        dist=dist, monitor=options.monitor,
        mode=options.monitor_mode if options.monitor_mode != "auto"
        else monitor_mode(options.monitor),
        checkpoint_every_steps=options.checkpoint_every_steps,
        log_every_steps=options.log_every_steps, plot=options.plot,
        progress=Progress(options.progress, enabled=dist.is_main),
        run_dir=RunDir(run_dir) if run_dir is not None and dist.is_main else None,
        ckpt=CheckpointManager(run_dir, keep_last=options.keep_last)
        if run_dir is not None else None,
        generators=loader_generators(train_loader), epoch_start_rng=None, resumed_rng=None,
        config=config, data_info=data_description(train_loader), resumed=False,
        callbacks=Callbacks(callbacks), logger_names=list(options.loggers), signals=None,
        view=LoopView(state, model=unwrap(model), optimizer=optimizer, epochs=options.epochs,
                      rank=dist.rank, world_size=dist.world_size,
                      run_dir=Path(run_dir) if run_dir is not None else None))


@contextlib.contextmanager
def run_context(options: FitOptions) -> Iterator[Signals]:
    """The sanitizer (``guard``), signal handling, deterministic kernels and the compile
    settings, for as long as the run lasts; yields the signal flags."""
    guard: Any = contextlib.nullcontext()
    if options.guard:
        from trainguard.sanitize import watch

        guard = watch()
    compiling = compile_options(options.compile) is not None
    with guard, Signals(options.handle_signals) as signals, _deterministic(options.deterministic), \
            compile_context(compiling):
        yield signals


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
