"""``fit``'s keyword arguments as one checked value (documented in :func:`trainguard.fit`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

import torch
from torch import nn

from trainguard.errors import UsageError
from trainguard.loop.callbacks import check_callbacks
from trainguard.loop.compiling import compile_options
from trainguard.loop.loggers import check_loggers

__all__ = ["FitOptions"]


@dataclass(frozen=True)
class FitOptions:
    """The keyword arguments of :func:`trainguard.fit`, same names and defaults."""

    epochs: int = 1
    device: Any = "auto"
    metrics: Mapping[str, Any] | None = None
    scheduler: Any = None
    scheduler_interval: Literal["epoch", "step"] = "epoch"
    clip_grad_norm: float | None = None
    accumulate_grad_batches: int = 1
    precision: Literal["32", "bf16", "fp16"] = "32"
    seed: int | None = None
    deterministic: bool = False
    run_dir: str | Path | None = None
    monitor: str = "val_loss"
    monitor_mode: Literal["auto", "min", "max"] = "auto"
    checkpoint_every_steps: int | None = None
    keep_last: int = 0
    resume: str | Path | None = None
    force: bool = False
    progress: str = "auto"
    log_every_steps: int = 50
    handle_signals: bool = False
    plot: bool = True
    guard: bool = False
    config: Mapping[str, Any] | None = None
    sync_batchnorm: bool = False
    callbacks: Sequence[Any] | None = None
    loggers: Sequence[Any] = ("csv",)
    compile: Any = False

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any]) -> "FitOptions":
        """The options among ``fit``'s ``locals()``."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in arguments.items() if k in names})

    def check(self, *, model: Any, optimizer: Any, loss_fn: Any, device: torch.device) -> None:
        """Raises:
            UsageError: the first bad argument, named with the value seen and what to pass.
        """
        if not isinstance(model, nn.Module):
            raise UsageError(f"fit(model=...) must be a torch.nn.Module, got "
                             f"{type(model).__name__}")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise UsageError("fit(optimizer=...) must be a torch.optim.Optimizer, got "
                             f"{type(optimizer).__name__}; e.g. "
                             "torch.optim.AdamW(model.parameters())")
        if not callable(loss_fn):
            raise UsageError("fit(loss_fn=...) must be callable(outputs, targets) -> loss tensor, "
                             "e.g. torch.nn.CrossEntropyLoss()")
        self._check_numbers()
        self._check_choices(device)
        if (self.checkpoint_every_steps or self.keep_last) and self.run_dir is None:
            raise UsageError("checkpoint_every_steps/keep_last need a run_dir to write to")
        check_callbacks(self.callbacks)
        check_loggers(self.loggers)
        compile_options(self.compile)

    def _check_numbers(self) -> None:
        if not isinstance(self.epochs, int) or self.epochs < 1:
            raise UsageError(f"epochs must be an int >= 1, got {self.epochs!r}")
        if not isinstance(self.accumulate_grad_batches, int) or self.accumulate_grad_batches < 1:
            raise UsageError(f"accumulate_grad_batches must be an int >= 1, got "
                             f"{self.accumulate_grad_batches!r}")
        if self.clip_grad_norm is not None and not self.clip_grad_norm > 0:
            raise UsageError(f"clip_grad_norm must be > 0 or None, got {self.clip_grad_norm!r}")
        if self.checkpoint_every_steps is not None and self.checkpoint_every_steps < 1:
            raise UsageError(f"checkpoint_every_steps must be >= 1, got "
                             f"{self.checkpoint_every_steps}")
        if self.keep_last < 0:
            raise UsageError(f"keep_last must be >= 0, got {self.keep_last}")
        if not isinstance(self.log_every_steps, int) or self.log_every_steps < 0:
            raise UsageError(f"log_every_steps must be an int >= 0 (0: never), got "
                             f"{self.log_every_steps!r}")

    def _check_choices(self, device: torch.device) -> None:
        if self.precision not in ("32", "bf16", "fp16"):
            raise UsageError(f"precision must be '32', 'bf16' or 'fp16', got {self.precision!r}")
        if self.precision == "fp16" and device.type == "cpu":
            raise UsageError("precision='fp16' needs CUDA (GradScaler); use precision='bf16' on "
                             "CPU")
        if self.scheduler_interval not in ("epoch", "step"):
            raise UsageError(f"scheduler_interval must be 'epoch' or 'step', got "
                             f"{self.scheduler_interval!r}")
        if self.monitor_mode not in ("auto", "min", "max"):
            raise UsageError(f"monitor_mode must be 'auto', 'min' or 'max', got "
                             f"{self.monitor_mode!r}")
        if self.progress not in ("auto", "bar", "plain", "none"):
            raise UsageError(f"progress must be 'auto', 'bar', 'plain' or 'none', got "
                             f"{self.progress!r}")
