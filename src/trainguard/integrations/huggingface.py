"""``TrainguardCallback`` for the Hugging Face ``Trainer``: add it to ``callbacks`` and the training
is watched.

Example::

    from transformers import Trainer
    from trainguard.integrations.huggingface import TrainguardCallback

    trainer = Trainer(model=model, args=args, train_dataset=train, eval_dataset=val,
                      callbacks=[TrainguardCallback(strict=True)])
    trainer.train()

The watcher starts at ``on_train_begin`` (the optimizer and scheduler are built by then) and stops
at ``on_train_end``, after the last evaluation and checkpoint. Findings are printed to stderr as
first seen and as a table at the end, and they point at the user's lines (a ``compute_loss``
override, the model's ``forward``, a callback), never inside transformers. At the end the counts
go through ``Trainer.log`` (``trainguard/findings``, ``trainguard/TG201``, ...), so they reach
every ``report_to`` integration and ``trainer.state.log_history``.

The callback learns its ``Trainer`` in ``on_init_end``, from the caller's frame (callbacks are not
handed the trainer), and wraps that trainer's ``train`` method so that an error raised by the
training stops the watcher and gets its diagnosis. Importing this module imports transformers.
"""

from __future__ import annotations

import functools
import os
import sys
import weakref
from typing import Any, TextIO

from transformers import Trainer, TrainerCallback

from trainguard.integrations._session import FindingsError, Session, as_metrics

__all__ = ["TrainguardCallback", "FindingsError"]


class TrainguardCallback(TrainerCallback):
    """Watch a ``transformers.Trainer``'s training with trainguard's sanitizer.

    Args:
        strict: raise :class:`FindingsError` from ``trainer.train()`` at the end of a training that
            reported findings (after the summary and ``Trainer.log``). Default False.
        select: code prefixes to report (``"TG2,TG301"`` or a list); default: the
            ``[tool.trainguard]`` table of the nearest ``pyproject.toml``, else every code.
        ignore: code prefixes not to report.
        report: also write ``{"findings": [...]}`` as JSON to this file at the end.
        every_step: check every optimizer step instead of sampling settled ones.
        stream: where findings and the summary are printed (default ``sys.stderr``).

    Raises:
        FindingsError: with ``strict=True``, from ``trainer.train()`` when findings were reported.
    """

    def __init__(self, *, strict: bool = False, select: str | list[str] | None = None,
                 ignore: str | list[str] | None = None,
                 report: str | os.PathLike[str] | None = None, every_step: bool = False,
                 stream: TextIO | None = None) -> None:
        self.strict = strict
        self._session = Session(select=select, ignore=ignore, report=report,
                                every_step=every_step, stream=stream)
        self._trainer: weakref.ref | None = None
        self._built_at: Any = None  # the user's line that built the Trainer

    @property
    def findings(self) -> list[Any]:
        """The findings of the last watched training (empty before one ran)."""
        watcher = self._session.watcher
        return watcher.findings if watcher is not None else []

    def on_init_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        from trainguard.sanitize.core.frames import user_location

        self._built_at = user_location(sys._getframe(1))
        self._attach(_calling_trainer())

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._trainer is None:  # (added with trainer.add_callback after __init__)
            self._attach(_calling_trainer())
        fresh = not self._session.active and _active_watcher() is None
        self._session.start()
        watcher = self._session.watcher
        try:
            if fresh:
                _replay_seed(args, watcher)
            _check_scheduler(args, kwargs.get("lr_scheduler"), kwargs.get("train_dataloader"),
                             watcher, self._built_at)
        except Exception as exc:  # a failing check must never break the training (TG002)
            watcher.hook_failed("TrainguardCallback.on_train_begin", exc)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not self._session.active:
            return
        findings = self._session.finish()
        trainer = self._trainer() if self._trainer is not None else None
        if trainer is not None:
            trainer.log(as_metrics(findings))  # every report_to integration and log_history
        if self.strict and findings:
            raise FindingsError(findings)

    def _attach(self, trainer: Any) -> None:
        """Remember ``trainer`` and wrap its ``train``: an error that ends the training stops the
        watcher, which adds its diagnosis to the error."""
        if trainer is None or (self._trainer is not None and self._trainer() is trainer):
            return
        self._trainer = weakref.ref(trainer)
        original = trainer.train
        session = self._session

        @functools.wraps(original)
        def train(*args: Any, **kwargs: Any) -> Any:
            try:
                return original(*args, **kwargs)
            except BaseException as exc:
                if session.active and not isinstance(exc, FindingsError):
                    session.finish(exc)
                raise

        trainer.train = train


def _calling_trainer() -> Any:
    """The ``Trainer`` whose method is calling its callbacks (``self`` of a frame up the stack),
    or None."""
    frame = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            return None
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, Trainer):
            return candidate
        frame = frame.f_back
    return None


def _active_watcher() -> Any:
    from trainguard.sanitize import watcher

    return watcher._active


def _replay_seed(args: Any, watcher: Any) -> None:
    """Tell the checks what the ``Trainer`` did before the watcher started: its ``__init__``
    seeded ``random``, numpy and torch with ``args.seed`` (``transformers.set_seed``), so the run
    asked to be reproducible (TG501 then reports a generator reseeded from the OS later, at that
    call)."""
    seed = getattr(args, "seed", None)
    if not isinstance(seed, int):
        return
    for name in ("random.seed", "numpy.random.seed", "torch.manual_seed"):
        watcher.emit("on_repro", name, seed)


def _check_scheduler(args: Any, scheduler: Any, loader: Any, watcher: Any, where: Any) -> None:
    """TG305 for the ``Trainer``'s own scheduler stepping: it steps ``lr_scheduler`` after every
    optimizer step, so a schedule written in epochs (``StepLR``, ``MultiStepLR``,
    ``ExponentialLR``) handed to it through ``optimizers=(optimizer, scheduler)`` cuts the rate
    two or more times per epoch (halves it, for ``ExponentialLR``). The runtime check sees only
    ``scheduler.step()`` calls in user code; here transformers makes them. Reported at the
    user's line that built the ``Trainer`` (where the scheduler was handed over).

    PyTorch's scheduler docs: StepLR's ``step_size`` is a "Period of learning rate decay" in calls
    to ``step()`` (https://pytorch.org/docs/stable/generated/torch.optim.lr_scheduler.StepLR.html).
    """
    import math

    from torch.optim import lr_scheduler as lrs

    from trainguard.sanitize.core.schedules import period as _period

    epoch_types = (lrs.StepLR, lrs.MultiStepLR, lrs.ExponentialLR)
    if not isinstance(scheduler, epoch_types) or where is None:
        return
    try:
        batches = len(loader)
    except TypeError:
        return  # (an iterable without a length: no epoch to compare with)
    steps = batches / max(1, args.gradient_accumulation_steps)  # optimizer steps per epoch
    period = _period(scheduler)
    if not period or not math.isfinite(period):
        return
    per_epoch = steps / period
    if per_epoch < (1 if isinstance(scheduler, lrs.ExponentialLR) else 2):
        return
    cut = "halves the rate" if isinstance(scheduler, lrs.ExponentialLR) else "cuts the rate"
    watcher.report(
        "TG305",
        f"{type(scheduler).__name__} (period {period:g} scheduler steps) was handed to the "
        f"Trainer, which steps its scheduler after each of the {steps:g} optimizer steps of an "
        f"epoch, so it {cut} {per_epoch:.1f} times per epoch: a schedule written in epochs is "
        "consumed per batch and the learning rate soon reaches nothing",
        fix="give the period in optimizer steps (step_size=EPOCHS * steps per epoch), or use "
            "TrainingArguments(lr_scheduler_type=...) instead",
        where=where)
