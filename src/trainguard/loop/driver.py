"""The epoch driver around :func:`~trainguard.loop.step.run_epoch`: what happens after each
optimizer step and each epoch (progress, loggers, callbacks, checkpoints, stops), and the end of
the run."""

from __future__ import annotations

import math
import time
import warnings
from typing import Any

import torch

from trainguard.ckpt.fingerprint import weights_sha256
from trainguard.loop import checkpointing
from trainguard.loop.history import History
from trainguard.loop.loggers import CSVLogger, make_loggers
from trainguard.loop.signals import TrainingInterrupted
from trainguard.loop.step import run_epoch

__all__ = ["Loop"]


class Loop:
    """Everything one ``fit`` call holds; built by :func:`trainguard.loop.setup.build_loop`.

    Attributes (set there): ``model`` (as trained: DDP-wrapped under torchrun),
    ``train_forward``/``eval_forward`` (what the forwards call: the model, or it through
    ``torch.compile``), ``train_loader``, ``val_loader``, ``optimizer``, ``loss_fn``,
    ``scheduler``, ``scheduler_interval``, ``device``, ``epochs``, ``accumulate``,
    ``clip_grad_norm``, ``precision``, ``amp``, ``metrics``, ``state`` (:class:`LoopState`),
    ``dist``, ``monitor``, ``mode``, ``checkpoint_every_steps``, ``log_every_steps``, ``plot``,
    ``progress``, ``run_dir`` (rank 0), ``ckpt``, ``generators``, ``epoch_start_rng``,
    ``resumed_rng``, ``config``, ``data_info``, ``resumed``, ``callbacks``, ``logger_names``,
    ``signals``, ``view`` (the callbacks' :class:`LoopView`).
    """

    def __init__(self, **parts: Any) -> None:
        self.__dict__.update(parts)
        self.loggers: list[Any] = []
        self._epoch_started, self._start_samples = time.perf_counter(), 0

    # -- resume
    def resume(self, source: Any, *, force: bool) -> bool:
        """Restore the run from ``source``; True when it has nothing left to train (all epochs
        done, or stopped at a callback's request), which it then says."""
        path = checkpointing.resume(self, source, force=force)
        self.resumed = True
        s = self.state
        if s.epoch >= self.epochs or s.stopped_epoch is not None:
            done = (f"stopped at epoch {s.stopped_epoch} ({s.stop_reason})"
                    if s.stopped_epoch is not None else f"complete ({s.epoch} of {self.epochs} "
                    "epochs)")
            self.progress.message(f"trainguard: {source} is {done}, step {s.step}; nothing to "
                                  "do")
            if self.run_dir:
                self.run_dir.close()
            return True
        if self.run_dir:
            self.run_dir.log(f"resumed from {path} at epoch={s.epoch} step={s.step} "
                             f"batches_done={s.batches_done}")
        self.progress.message(f"trainguard: resumed from {path} (epoch {s.epoch + 1}, "
                              f"step {s.step}, batch {s.batches_done})")
        return False

    # -- the run
    def run(self) -> History:
        s = self.state
        if self.ckpt is not None and self.dist.is_main:
            self.ckpt.remove_partial_files()
        if self.run_dir:
            self.run_dir.log(f"start epoch={s.epoch} step={s.step} device={self.device} "
                             f"config={self.config}")
        self.loggers = make_loggers(self.logger_names, self.run_dir,
                                    resumed_step=s.step if self.resumed else None) \
            if self.dist.is_main else []
        self.logs_steps = self.progress.mode != "none" or any(
            not isinstance(logger, CSVLogger) for logger in self.loggers)
        try:
            self.callbacks("on_fit_start", self.view)
            while s.epoch < self.epochs and s.stopped_epoch is None:
                self._epoch()
        finally:
            self.progress.close()
            for logger in self.loggers:
                logger.close()
        return self._finish()

    def _epoch(self) -> None:
        s = self.state
        s.start_epoch(float(self.optimizer.param_groups[0]["lr"]))
        self._epoch_started, self._start_samples = time.perf_counter(), s.samples
        self.callbacks("on_epoch_start", self.view)
        total = len(self.train_loader) if hasattr(self.train_loader, "__len__") else None
        self.progress.start_epoch(s.epoch, self.epochs, total, s.batches_done)
        val = run_epoch(self)
        if val is not None:
            self._end_epoch(val)

    def epoch_elapsed_s(self) -> float:
        """Seconds of the current epoch so far, before a resume included."""
        return self.state.epoch_elapsed_s + time.perf_counter() - self._epoch_started

    # -- after each optimizer step
    def after_step(self, window: list[Any], losses: list[torch.Tensor]) -> bool:
        """Bookkeeping after an optimizer step; True when every rank agreed to stop."""
        s = self.state
        s.batches_done += len(window)
        if self.progress.mode == "bar":
            self.progress.advance(s.batches_done)
        if self.log_every_steps and s.step % self.log_every_steps == 0 and self.logs_steps:
            self._log_step(window, losses)
        if self.callbacks.wants_step:
            self.callbacks("on_step_end", self.view, _step_loss(window, losses))
        signum, stop = self.dist.agreed_stop(self.signals.received, s.stop_reason is not None)
        if signum is not None:
            raise TrainingInterrupted(signum, self.save("signal"))
        if stop:
            s.stopped_epoch = s.epoch + 1
            s.stop_reason = s.stop_reason or "a callback on another rank asked to stop"
            self.save("stop")
            return True
        if self.checkpoint_every_steps and s.step % self.checkpoint_every_steps == 0:
            self.save("step")
        return False

    def _log_step(self, window: list[Any], losses: list[torch.Tensor]) -> None:
        s = self.state
        if self.progress.mode != "none":
            elapsed = max(time.perf_counter() - self._epoch_started, 1e-9)
            # note: a host sync, once every log_every_steps steps
            self.progress.update(s.batches_done, s.step, s.loss_sum.item() / max(s.samples, 1),
                                 (s.samples - self._start_samples) / elapsed)
        if self.loggers:
            values = {"train_loss_step": float(_step_loss(window, losses)),
                      "lr_step": float(self.optimizer.param_groups[0]["lr"])}
            for logger in self.loggers:
                logger.log_step(s.step, values)

    # -- after each epoch
    def _end_epoch(self, val: dict[str, float]) -> None:
        s = self.state
        row: dict[str, float] = {"epoch": s.epoch + 1,
                                 "train_loss": self.dist.mean(s.loss_sum, s.samples)}
        row.update({f"val_{k}": v for k, v in val.items()})
        if val:
            self.callbacks("on_validation_end", self.view, dict(row))
        row["lr"] = s.epoch_start_lr  # the LR the epoch started with
        row["elapsed_s"] = round(self.epoch_elapsed_s(), 3)
        if self.scheduler is not None and self.scheduler_interval == "epoch":
            self._step_epoch_scheduler(row)
        s.history.rows.append(row)
        is_best = self._update_best(row)
        self.progress.end_epoch(row)
        for logger in self.loggers:
            logger.log_epoch(s.step, row, s.history.rows)
        if self.run_dir:
            self.run_dir.log("epoch " + " ".join(f"{k}={v:.6g}" for k, v in row.items()))
        self.callbacks("on_epoch_end", self.view, row)
        signum, stop = self.dist.agreed_stop(self.signals.received, s.stop_reason is not None)
        s.end_epoch()
        self.epoch_start_rng = None
        if stop:
            s.stopped_epoch = int(row["epoch"])
            s.stop_reason = s.stop_reason or "a callback on another rank asked to stop"
        self.save("epoch", is_best=is_best)
        if signum is not None:
            raise TrainingInterrupted(signum, self.ckpt.folder / "last.pt" if self.ckpt else None)

    def _step_epoch_scheduler(self, row: dict[str, float]) -> None:
        with warnings.catch_warnings():
            if self.state.step > 0:
                # Resumed at the end of an epoch, the new process has not called
                # optimizer.step() yet, and PyTorch's order check would misfire: the optimizer
                # did step (state.step > 0), in the process that wrote the checkpoint.
                warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler")
            if isinstance(self.scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
                self.scheduler.step(row.get(self.monitor, row["train_loss"]))
            else:
                self.scheduler.step()

    def _update_best(self, row: dict[str, float]) -> bool:
        value = row.get(self.monitor)
        if value is None or math.isnan(value):
            return False
        best = self.state.history.best
        better = best is None or (value < best["value"] if self.mode == "min"
                                  else value > best["value"])
        if better:
            self.state.history.best = {"monitor": self.monitor, "mode": self.mode,
                                       "value": value, "epoch": int(row["epoch"])}
        return better

    def save(self, reason: str, *, is_best: bool = False) -> Any:
        return checkpointing.save(self, reason, is_best=is_best)

    # -- the end
    def _finish(self) -> History:
        s = self.state
        history = self.finished_history()
        if self.run_dir:
            self.run_dir.write_summary(self.summary(history))
            if self.plot:
                self.run_dir.plot(history.rows)
            self.run_dir.log(f"done step={s.step} weights_sha256={history.weights_sha256}"
                             + (f" stopped: {s.stop_reason}" if history.stopped_early else ""))
            self.run_dir.close()
        self.callbacks("on_fit_end", self.view)
        return history

    def finished_history(self) -> History:
        """The run's :class:`History`, with the final weights' fingerprint (rank 0's buffers)."""
        s = self.state
        history = s.history
        history.step = s.step
        history.stopped_early = s.stopped_epoch is not None
        history.stopped_epoch, history.stop_reason = s.stopped_epoch, s.stop_reason
        self.dist.sync_buffers(self.model)
        history.weights_sha256 = weights_sha256(self.model)
        return history

    def summary(self, history: History) -> dict[str, Any]:
        """``summary.json``'s content."""
        rows = history.rows
        accs = [r["val_accuracy"] for r in rows if "val_accuracy" in r]
        return {
            "epochs": self.epochs, "steps": history.step, "seed": self.config.get("seed"),
            "best_val_accuracy": max(accs) if accs else None,
            "final": rows[-1] if rows else None, "best": history.best,
            "stopped_early": history.stopped_early, "stopped_epoch": history.stopped_epoch,
            "stop_reason": history.stop_reason,
            "weights_sha256": history.weights_sha256, "data": self.data_info,
            "device": str(self.device), "torch_version": str(torch.__version__),
            "config": self.config,
        }


def _step_loss(window: list[Any], losses: list[torch.Tensor]) -> torch.Tensor:
    """The step's loss: its micro-batches' losses weighted by their share of its samples."""
    if len(losses) == 1:
        return losses[0]
    return sum(loss * share for loss, (_, _, share) in zip(losses, window))  # type: ignore
