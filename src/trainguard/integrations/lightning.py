"""``TrainguardCallback`` for Lightning: ``Trainer(callbacks=[TrainguardCallback()])`` watches
the fit.

Example::

    import lightning as L
    from trainguard.integrations.lightning import TrainguardCallback

    trainer = L.Trainer(max_epochs=3, callbacks=[TrainguardCallback(strict=True)])
    trainer.fit(model, train_loader, val_loader)

The watcher starts in the callback's ``setup`` hook, before ``configure_optimizers`` runs, and stops
in its ``teardown`` hook, after the last epoch and checkpoint: every hook of the LightningModule in
between is watched (``training_step``, ``validation_step``, ``on_*_epoch_end``, ...). Findings are
printed to stderr as first seen and as a table at the end, and they point at the LightningModule's
lines, never inside Lightning (``sanitize/frames.py``: installed packages are not user code).

Importing this module imports Lightning: ``lightning.pytorch`` when it is installed (or already
imported), ``pytorch_lightning`` otherwise; when both are imported the callback is an instance of
both ``Callback`` classes, so either ``Trainer`` accepts it.
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

from trainguard.integrations._session import FindingsError, Session, as_markdown, as_metrics

__all__ = ["TrainguardCallback", "FindingsError"]


def _bases() -> tuple[type, ...]:
    """The ``Callback`` classes of the Lightning packages in use."""
    bases = []
    imported = [name for name in ("lightning.pytorch", "pytorch_lightning") if name in sys.modules]
    for name in imported or ("lightning.pytorch", "pytorch_lightning"):
        try:
            module = __import__(name, fromlist=["Callback"])
        except ImportError:
            continue
        bases.append(module.Callback)
        if not imported:
            break
    if not bases:
        raise ImportError("trainguard.integrations.lightning needs Lightning: "
                          "pip install lightning (or pytorch-lightning)")
    return tuple(bases)


class TrainguardCallback(*_bases()):  # type: ignore[misc]
    """Watch a Lightning fit (also ``validate``/``test``/``predict``) with trainguard's sanitizer.

    Args:
        strict: raise :class:`FindingsError` at the end of a stage that reported findings, so the
            ``trainer.fit(...)`` call fails (after the summary and the loggers got them). Default
            False.
        select: code prefixes to report (``"TG2,TG301"`` or a list); default: the
            ``[tool.trainguard]`` table of the nearest ``pyproject.toml``, else every code.
        ignore: code prefixes not to report.
        report: also write ``{"findings": [...]}`` as JSON to this file at the end.
        every_step: check every optimizer step instead of sampling settled ones.
        stream: where findings and the summary are printed (default ``sys.stderr``).

    At the end, on global rank 0, every logger of the trainer gets ``trainguard/findings`` (the
    number of findings) and ``trainguard/TG201``-style counts through ``log_metrics``; a logger
    whose ``experiment`` has ``add_text`` (TensorBoard) also gets the table as text.

    Raises:
        FindingsError: with ``strict=True``, from ``trainer.fit`` when findings were reported.
    """

    def __init__(self, *, strict: bool = False, select: str | list[str] | None = None,
                 ignore: str | list[str] | None = None,
                 report: str | os.PathLike[str] | None = None, every_step: bool = False,
                 stream: TextIO | None = None) -> None:
        super().__init__()
        # Lightning skips a hook that is None on the instance: the per-batch hooks this callback
        # does not use cost the fit nothing (a subclass's own hooks, and super() calls, are kept)
        for name in _UNUSED:
            if getattr(type(self), name) is getattr(TrainguardCallback, name):
                setattr(self, name, None)
        self.strict = strict
        self._session = Session(select=select, ignore=ignore, report=report,
                                every_step=every_step, stream=stream)

    @property
    def findings(self) -> list[Any]:
        """The findings of the last watched stage (empty before one ran)."""
        watcher = self._session.watcher
        return watcher.findings if watcher is not None else []

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        self._session.start()
        if stage == "fit":
            try:
                _check_seed(self._session.watcher)
            except Exception as exc:  # a failing check must never break the fit (TG002)
                self._session.watcher.hook_failed("TrainguardCallback.setup", exc)

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        watcher = self._session.watcher
        if self._session.active:
            try:
                _check_schedulers(trainer, pl_module, watcher)
            except Exception as exc:  # a failing check must never break the fit (TG002)
                watcher.hook_failed("TrainguardCallback.on_train_start", exc)

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if not self._session.active:
            return
        findings = self._session.finish()
        if trainer.is_global_zero:
            _log(trainer, findings)
        if self.strict and findings:
            raise FindingsError(findings)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        if self._session.active and not isinstance(exception, FindingsError):
            self._session.finish(exception)


# the hooks TrainguardCallback implements, and those Lightning calls directly (not through
# ``_call_callback_hooks``): never set to None
_KEPT = frozenset({"setup", "teardown", "on_train_start", "on_exception", "on_save_checkpoint",
                   "on_load_checkpoint"})


def _unused_hooks(cls: type) -> frozenset[str]:
    """The hooks of Lightning's ``Callback`` that ``cls`` does not implement, where Lightning
    skips a hook set to None; empty elsewhere.

    Lightning calls every hook of every callback, overridden or not, each inside a profiler
    context (``with trainer.profiler.profile(f"[Callback]{callback.state_key}.{hook}")``): about
    1,200 calls in a fit of 112 optimizer steps of two micro-batches, a few microseconds each,
    all of them no-ops here. Its ``_call_callback_hooks`` (``trainer/call.py``, Lightning 2.x)
    skips a hook that is not callable. Where the installed package is older, or calls its hooks
    another way, every hook is kept."""
    names: set[str] = set()
    for base in cls.__mro__[1:]:
        if base.__name__ != "Callback" or not base.__module__.endswith(".callbacks.callback"):
            continue
        package = base.__module__[:-len(".callbacks.callback")]
        try:
            version = __import__(package, fromlist=["__version__"]).__version__
            call = __import__(f"{package}.trainer.call", fromlist=["_call_callback_hooks"])
            skips = "callable" in call._call_callback_hooks.__code__.co_names
        except (ImportError, AttributeError):
            return frozenset()
        if not skips or int(str(version).split(".")[0]) < 2:
            return frozenset()
        names |= {n for n, v in vars(base).items() if n.startswith("on_") and callable(v)}
    return frozenset(names - _KEPT - set(vars(cls)))


_UNUSED = _unused_hooks(TrainguardCallback)


def _log(trainer: Any, findings: list[Any]) -> None:
    metrics = as_metrics(findings)
    for logger in trainer.loggers:
        logger.log_metrics(metrics, step=trainer.global_step)
        experiment = getattr(logger, "experiment", None)
        if hasattr(experiment, "add_text"):
            experiment.add_text("trainguard", as_markdown(findings), trainer.global_step)


# torch.manual_seed takes any 64-bit seed, but the default generator's seed drawn from the OS at
# start-up is a random 64-bit number, while seeds people choose (and seed_everything's, at most
# 2**32 - 1) are small
_OS_SEED = 2**32


def _check_seed(watcher: Any) -> None:
    """TG501 for a fit that asks for a reproducible run (``Trainer(deterministic=True)`` turns on
    ``torch.use_deterministic_algorithms``) while torch's generator still has the seed drawn from
    the OS at start-up: no ``seed_everything`` (it sets ``PL_GLOBAL_SEED``) nor
    ``torch.manual_seed`` ran, so the initial weights, dropout masks and shuffling differ every
    run. The runtime check sees seeding calls only inside the watched block; the fit's own seed is
    set before it. Reported at the user's ``trainer.fit(...)`` line.

    PyTorch's reproducibility notes: "You can use torch.manual_seed() to seed the RNG for all
    devices" (https://pytorch.org/docs/stable/notes/randomness.html).
    """
    import torch

    from trainguard.sanitize.core.frames import user_location

    asked = torch.are_deterministic_algorithms_enabled() or torch.backends.cudnn.deterministic
    if not asked or os.environ.get("PL_GLOBAL_SEED") or torch.initial_seed() < _OS_SEED:
        return
    watcher.report(
        "TG501",
        f"this fit asks for a reproducible run (deterministic algorithms are on) but torch was "
        f"never seeded: its generator still has the seed drawn at start-up "
        f"({torch.initial_seed()}), so the initial weights, dropout masks and data order differ "
        "every run",
        fix="call lightning.seed_everything(SEED) (workers=True for DataLoader workers) before "
            "the model is built",
        where=user_location(sys._getframe(1)))


def _check_schedulers(trainer: Any, pl_module: Any, watcher: Any) -> None:
    """TG305 for Lightning's own scheduler stepping: a schedule written in epochs (``StepLR``,
    ``MultiStepLR``, ``ExponentialLR``) configured with ``"interval": "step"``, so Lightning steps
    it after every optimizer step and it cuts the rate two or more times per epoch (halves it,
    for ``ExponentialLR``). The runtime check sees only ``scheduler.step()`` calls in user code;
    here Lightning makes them, from the configuration ``configure_optimizers`` returned, which is
    where the finding points (the ``"interval"`` entry).

    PyTorch's scheduler docs: "Learning rate scheduling should be applied after optimizer's
    update" and StepLR's ``step_size`` is a "Period of learning rate decay" in calls to ``step()``
    (https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate).
    """
    import math

    from torch.optim import lr_scheduler as lrs

    from trainguard.sanitize.core.schedules import period as _period

    batches = trainer.num_training_batches
    if not isinstance(batches, int) or batches <= 0:
        return  # (an iterable without a length: no epoch to compare with)
    steps = batches / max(1, trainer.accumulate_grad_batches)  # optimizer steps per epoch
    for config in trainer.lr_scheduler_configs:
        scheduler = config.scheduler
        if config.interval != "step" or not isinstance(
                scheduler, (lrs.StepLR, lrs.MultiStepLR, lrs.ExponentialLR)):
            continue
        period = _period(scheduler)
        if not period or not math.isfinite(period):
            continue
        per_epoch = steps / max(1, config.frequency) / period
        if per_epoch < (1 if isinstance(scheduler, lrs.ExponentialLR) else 2):
            continue
        cut = "halves the rate" if isinstance(scheduler, lrs.ExponentialLR) else "cuts the rate"
        watcher.report(
            "TG305",
            f"{type(scheduler).__name__} (period {period:g} scheduler steps) is configured with "
            f"\"interval\": \"step\", so Lightning steps it after each of the {steps:g} optimizer "
            f"steps of an epoch and it {cut} {per_epoch:.1f} times per epoch: a schedule written "
            "in epochs is consumed per batch and the learning rate soon reaches nothing",
            fix='use "interval": "epoch" (Lightning\'s default) for a schedule written in epochs, '
                "or give the period in optimizer steps",
            where=_interval_line(type(pl_module).configure_optimizers))


def _interval_line(function: Any) -> tuple[str, int, int] | None:
    """The ``"interval"`` key of a dict in ``function``'s source (one whose value is ``"step"``
    first), else its ``def`` line."""
    import ast

    from trainguard.sanitize.core.bounds import parse_file

    code = getattr(function, "__code__", None)
    if code is None:
        return None
    lines = [line for _, _, line in code.co_lines() if line is not None]
    low, high = (min(lines), max(lines)) if lines else (code.co_firstlineno, code.co_firstlineno)
    tree = parse_file(code.co_filename)
    found = []  # (the value is the constant "step", line, column) of each "interval" key
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Dict) and low <= node.lineno <= high:
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == "interval":
                    step = isinstance(value, ast.Constant) and value.value == "step"
                    found.append((not step, key.lineno, key.col_offset + 1))
    if found:
        _, line, col = min(found)
        return (code.co_filename, line, col)
    return (code.co_filename, code.co_firstlineno, 1)
