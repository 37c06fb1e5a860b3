"""Runtime checks: one file per catalogue code, discovered automatically.

Writing a check
===============
Add ``checks/tgNNN_short_name.py`` defining one subclass of :class:`Check` (it is found by
:func:`discover`; the file name does not matter beyond ``tg*.py``). A check:

- sets ``code`` to its catalogue code (``"TG201"``); name, why and fix come from the catalogue;
- has a docstring that says what it watches, when it fires, what must stay silent (the catalogue's
  "Precision" section), what it costs ("Cost:": its work per checked step and at exit, with the
  bound of every walk) and the PyTorch doc or issue the rule comes from;
- walks graphs, frames, containers, source and the heap only through the bounded helpers
  (``holders.graph_nodes``/``find_holder``, ``frames.user_frames``, ``bounds.parse_file``,
  ``bounds.live_objects``; limits in ``sanitize/core/bounds.py``): when a bound is hit it goes on with
  what it found (or reports nothing) and never searches on. The watcher's watchdog
  (``sanitize/core/watchdog.py``) stops a check whose events take more than half the run's wall time
  (once the checks have taken 2 s), or whose exit work runs past 2 s in all: TG002 names it and
  its time;
- reads tensor values only through ``sanitize/core/values.py`` (CPU now, CUDA without blocking or on a
  rare path, no other device: ``meta`` tensors have no values);
- overrides only the ``on_*`` methods it needs. The watcher calls a method only when the check
  overrides it, so an unused event costs nothing;
- sets ``module_types`` (a tuple of ``nn.Module`` subclasses, e.g. ``(nn.BatchNorm1d,)``) when it
  needs ``on_forward_pre``/``on_forward`` for inner modules of those types. Every other inner
  module call stays on PyTorch's fast path, so ask for the narrowest types; ``(nn.Module,)`` sends
  every module through the watcher and costs several percent of a small step;
- reports with ``self.report(message, fix=..., where=...)``. ``where`` defaults to the user's own
  file:line (the first frame outside torch, trainguard and installed packages); findings at the same
  place are merged with a count, and suppression comments and ``--select``/``--ignore`` are applied
  by the watcher, not by the check;
- keeps its own state on ``self`` (one instance per ``watch()``), never references user tensors
  strongly beyond the event (use ``weakref`` or :meth:`State.track_graph`), and never changes
  values the user computes;
- may set ``on_demand`` to events it needs only while something is pending (e.g. ``on_step`` to
  settle followed graphs) and call :meth:`Check.arm`/:meth:`Check.disarm`: unarmed, those events
  do not call it at all, which keeps a correct run's steps cheap;
- may raise: the exception is caught, reported as TG002 check-failed, and the check is switched off
  for the rest of the run; the user's code never sees it.

Events (arguments are what PyTorch passed; nothing is copied):

- ``on_forward_pre(call)``: a call of a module whose type is in the check's ``module_types``
  starts; ``call`` is a :class:`~trainguard.sanitize.core.records.ForwardCall`.
- ``on_forward(call)``: it returned (``call.output`` set), or raised (``call.failed`` True).
- ``on_forward_failed(module, exc, where)``: an outermost module call raised ``exc`` (checked and
  settled steps alike; ``state.failed_module``/``failed_inputs`` name the innermost module it
  passed through); ``where`` is the user's line of the call. The script may catch it and go on.
- ``on_root_forward(call)``: an outermost module call returned (not a loss module); ``call.where``
  is the user's line, ``call.direct`` whether user code made the call itself, ``call.made`` the
  stamp on its outputs when a check declares ``stamps``.
- ``on_loss(call)``: a loss was computed by an ``nn.modules.loss._Loss`` module or a watched
  functional loss (``F.cross_entropy``, ...); a :class:`~trainguard.sanitize.core.records.LossCall`.
- ``on_backward(call)``: ``Tensor.backward``/``torch.autograd.backward`` is about to run; a
  :class:`~trainguard.sanitize.core.records.BackwardCall` (roots in ``call.tensors``).
- ``on_backward_done(call)``: it returned normally.
- ``on_backward_failed(call, exc)``: it raised ``exc``; the roots are still in ``call.tensors``:
  note what ``on_error`` will need in ``call.facts``.
- ``on_step_pre(optimizer)`` / ``on_step(optimizer)``: ``optimizer.step()`` starts / returned
  (``state.step`` counts completed steps).
- ``on_zero_grad(owner, set_to_none)``: ``Optimizer.zero_grad`` or ``Module.zero_grad`` was called.
- ``on_scheduler_step(scheduler)``: user code called an LR scheduler's ``step()`` (not the call
  its constructor makes, not a scheduler stepping another).
- ``on_clip(name, params)``: ``torch.nn.utils.clip_grad_norm_``/``clip_grad_value_`` is about
  to run; ``params`` is the list of tensors it clips.
- ``on_closure(optimizer, calls)``: ``optimizer.step(closure)`` is about to evaluate its
  closure; ``calls`` evaluations came before in this step (LBFGS makes several).
- ``on_unscale(scaler, optimizer, by_user)``: an enabled ``GradScaler`` is about to unscale the
  optimizer's gradients (``by_user``: user code called ``scaler.unscale_``; else
  ``scaler.step`` did).
- ``on_sampler_iter(sampler)``: a ``DistributedSampler`` starts an epoch's iteration (its
  ``__iter__`` body runs; with a DataLoader, at the first batch of that epoch).
- ``on_repro_pre(name, value)`` / ``on_repro(name, value)``: a call that seeds or restores a global
  random generator, or sets a determinism flag, is about to run / returned. ``name`` is one of
  ``"random.seed"``, ``"random.setstate"``, ``"numpy.random.seed"``, ``"numpy.random.set_state"``,
  ``"torch.manual_seed"``, ``"torch.seed"``, ``"torch.set_rng_state"``, ``"torch.cuda.manual_seed"``,
  ``"torch.cuda.manual_seed_all"``, ``"torch.use_deterministic_algorithms"``,
  ``"torch.set_deterministic_debug_mode"``, ``"cudnn.benchmark"``, ``"cudnn.deterministic"``;
  ``value`` is the seed, state, mode or flag passed (None for a seed from the OS). Also
  ``"numpy.random.default_rng"`` (``on_repro`` only): the user's code made a numpy Generator
  without a seed; ``value`` is that generator. Calls torch makes itself (``fork_rng``,
  DataLoader workers seeding themselves) are not events.
- ``on_library_import_pre(name)`` / ``on_library_import(name)``: a library module (a file outside
  the user's code, or none) starts / ends running its top-level code under its first import; the
  outermost one only (``sanitize/probes/imports.py``): what it imports runs in between, except a
  user module's own top-level code, which ends the stretch while it runs. ``name`` is the module's.
- ``on_loader_iter(loader)``: ``DataLoader.__iter__`` was called (once per pass over a DataLoader,
  before any worker starts).
- ``on_built(obj, where)``: user code built a ``DataLoader``, a ``DistributedSampler``, an
  optimizer (``torch.optim.Optimizer.__init__`` returned), an ``nn.Softmax``/``nn.Softmax2d`` or
  an ``nn.Sigmoid``; ``where`` is the user's line.
- ``on_functional(name, args, kwargs)``: a watched ``torch.nn.functional`` function other than a
  loss (``"dropout"``, ``"dropout2d"``, ...).
- ``on_mode(call)``: an outermost ``Module.train(mode)``/``eval()`` call is about to run (not the
  calls it makes on the children); a :class:`~trainguard.sanitize.core.records.ModeCall`. Runs
  call these once per epoch or evaluation (a Hugging Face ``Trainer``: once per step).
- ``on_params_added(module, params, where)``: user code registered parameters (``params``, a
  list) on ``module`` outside every module's ``__init__``: a parameter or a submodule assigned to
  a model already built (``model.head = nn.Linear(...)``, ``model[2] = ...``, a parameter made in
  a training hook); ``where`` is the user's line. Modules being built do not send it.
- ``on_save(obj, f)`` / ``on_load(f, kwargs)``: ``torch.save`` / ``torch.load`` was called.
- ``on_resume(boundary)``: once the training loop has settled, steps that repeat the settled cycle
  exactly are not checked (``sanitize/core/cadence.py``): one in 16 is (one in 32 after 8 clean
  samples in a row), and the first call that differs
  goes to the checks again. Before a check sees calls again after calls it did not see, it gets
  ``on_resume``: ``boundary`` True at the start of a cycle (right after the boundary optimizer's
  ``step()``; in a loop without optimizer steps, right after its repeated backward, or forward
  for an inference loop), False in the middle of one (the calls of that cycle so far were not
  seen). The
  counters in ``self.state`` stay exact throughout; a check that compares them across events must
  not read a gap as a missing call.
- ``on_settle()``: the loop has just settled (or settled again after a sampled cycle): the calls
  that follow are not seen until the next ``on_resume``. A check that keeps hooks on tensors for
  its own use removes them here, so settled steps do not pay for them, and puts them back in
  ``on_resume``.
- ``on_exit()``: the watched block or script ends, normally or not.
- ``on_error(exc)``: the script dies of ``exc``; return a :class:`Diagnosis` to explain a
  PyTorch error, or None.

Under ``torchrun`` (``WORLD_SIZE`` > 1), two more methods take part in rank 0's merged report
(``sanitize/ranks/link.py``); they are not events and are called once, at exit, after ``on_exit``:

- ``rank_facts()``: on every rank, JSON-ready data this rank contributes (None: nothing); sent to
  rank 0 with the rank's findings. A check that uses it must also listen to some event.
- ``on_ranks(facts)``: on rank 0 only, with ``{rank: that rank's rank_facts()}`` for every rank
  whose report arrived (rank 0 included); reports with ``self.bus.report(...)`` and may set
  the returned finding's ``ranks``. ``self.bus.ranks`` is the
  :class:`~trainguard.sanitize.ranks.RankLink` (``rank``, ``world_size``, ``put``/``ready`` for
  non-blocking use of the c10d store during the run), or None in a single process.

``self.state`` is the watcher's shared :class:`~trainguard.sanitize.core.state.State`: the optimizer
step count, backward count, the stack of module calls in progress, whether a backward is running,
the models seen, and helpers to follow an autograd graph's lifetime without keeping it alive.

Compiled regions: inside a ``torch.compile``'d function the watcher's hooks return at once
(``torch.compiler.is_compiling()``), so only events outside the compiled region (the compiled
module's own call, losses, backward, optimizer steps, save/load) reach checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

if TYPE_CHECKING:
    from trainguard.findings import Finding
    from trainguard.sanitize.core.records import BackwardCall, ForwardCall, LossCall, ModeCall
    from trainguard.sanitize.core.state import State
    from trainguard.sanitize.core.bus import Bus

__all__ = ["Check", "Diagnosis", "EVENTS"]

EVENTS = (
    "on_forward_pre", "on_forward", "on_forward_failed", "on_root_forward", "on_loss", "on_backward",
    "on_backward_done", "on_backward_failed", "on_step_pre", "on_step", "on_zero_grad",
    "on_functional", "on_save", "on_load", "on_file_write", "on_exit", "on_error",
    "on_scheduler_step", "on_clip", "on_closure", "on_unscale",
    "on_sampler_iter", "on_repro_pre", "on_repro", "on_library_import_pre", "on_library_import",
    "on_loader_iter", "on_resume", "on_settle",
    "on_built", "on_mode", "on_params_added", "on_grad_block_exit",
)


@dataclass
class Diagnosis:
    """An explanation of a PyTorch error, printed after its traceback.

    Attributes:
        message: what happened in this script, with the values seen.
        fix: what to do.
        where: ``(path, line)`` of the user's line it concerns; default the failing line.
    """

    message: str
    fix: str | None = None
    where: tuple[str, int] | None = None


class Check:
    """Base class of a runtime check. Subclasses set ``code`` and override ``on_*`` methods."""

    code: ClassVar[str] = ""
    module_types: ClassVar[tuple[type, ...]] = ()
    stamps: ClassVar[Literal["", "outputs", "inputs"]] = ""
    """``"outputs"``: every outermost output made with grad on carries a
    :class:`~trainguard.sanitize.core.records.Made` stamp in its ``grad_fn.metadata`` (key
    :data:`~trainguard.sanitize.core.records.MADE`), settled steps included; ``"inputs"``: the
    stamp also holds weak references to the call's tensor arguments (``probes/stamps.py``).
    Stamping costs a few microseconds per outermost call: ask only when the check reads them."""
    always: tuple[str, ...] = ()
    """Events this check needs on settled steps too (see ``sanitize/core/cadence.py``):
    ``on_root_forward``, ``on_loss``, ``on_backward`` and ``on_step`` are supported. May be set
    per instance in ``__init__``. The check reads ``self.bus.cadence.skipping`` to know whether
    the step is a settled one. On a settled step ``on_root_forward`` gets one record reused for
    every settled call (emptied after the event): read it during the event, never keep it."""
    spent_s: float = 0.0
    """Seconds this check took in events slower than ``watchdog.SLOW_S`` (``watchdog.py``)."""
    on_demand: ClassVar[tuple[str, ...]] = ()
    """Events this check listens to only while armed (see :meth:`arm`); one of
    ``on_root_forward``, ``on_backward``, ``on_backward_done``, ``on_step_pre``, ``on_step``."""

    def __init__(self, bus: "Bus") -> None:
        self.bus = bus
        self.state: State = bus.state
        self._armed = False

    def arm(self) -> None:
        """Start receiving the :attr:`on_demand` events (e.g. once something is pending).
        A check with nothing pending costs nothing on those events."""
        if not self._armed:
            self._armed = True
            self.bus.listen(self, self.on_demand, True)

    def hold(self) -> None:
        """Keep the steps checked in full: call it from an event while evidence builds up over
        several steps (see ``sanitize/core/cadence.py``); the cycle in progress then cannot settle."""
        self.bus.cadence.hold()

    def disarm(self) -> None:
        """Stop receiving the :attr:`on_demand` events until the next :meth:`arm`."""
        if self._armed:
            self._armed = False
            self.bus.listen(self, self.on_demand, False)

    def release(self) -> None:
        """Remove the hooks this check put on the user's tensors. Called when the check is
        switched off after raising (TG002: it gets no event after that, ``on_exit`` included);
        a check that installs such hooks overrides it and calls it from ``on_exit`` too."""

    def report(self, message: str, *, fix: str | None = None,
               where: tuple[str, int] | None = None, **extra: Any) -> "Finding | None":
        """Report this check's finding at ``where`` (default: the user's current line).

        Returns the recorded :class:`~trainguard.findings.Finding` (the earlier one when this
        place was already reported), or None when it is suppressed or not selected. A check may
        update its ``message`` later (at ``on_exit``) so the final report gives final counts.
        """
        return self.bus.report(self.code, message, fix=fix, where=where, extra=extra or None)

    # Event methods; the watcher only calls the ones a subclass overrides.
    def on_forward_pre(self, call: ForwardCall) -> None: ...
    def on_forward(self, call: ForwardCall) -> None: ...
    def on_root_forward(self, call: ForwardCall) -> None: ...
    def on_loss(self, call: LossCall) -> None: ...
    def on_backward(self, call: BackwardCall) -> None: ...
    def on_backward_done(self, call: BackwardCall) -> None: ...
    def on_backward_failed(self, call: BackwardCall, exc: BaseException) -> None: ...
    def on_step_pre(self, optimizer: Any) -> None: ...
    def on_step(self, optimizer: Any) -> None: ...
    def on_zero_grad(self, owner: Any, set_to_none: bool) -> None: ...
    def on_scheduler_step(self, scheduler: Any) -> None: ...
    def on_clip(self, name: str, params: list) -> None: ...
    def on_closure(self, optimizer: Any, calls: int) -> None: ...
    def on_unscale(self, scaler: Any, optimizer: Any, by_user: bool) -> None: ...
    def on_sampler_iter(self, sampler: Any) -> None: ...
    def on_repro_pre(self, name: str, value: Any) -> None: ...
    def on_repro(self, name: str, value: Any) -> None: ...
    def on_library_import_pre(self, name: str) -> None: ...
    def on_library_import(self, name: str) -> None: ...
    def on_loader_iter(self, loader: Any) -> None: ...
    def on_built(self, obj: Any, where: Any) -> None: ...
    def on_resume(self, boundary: bool) -> None: ...
    def on_settle(self) -> None: ...
    def on_functional(self, name: str, args: tuple, kwargs: dict) -> None: ...
    def on_mode(self, call: ModeCall) -> None: ...
    def on_grad_block_exit(self, where: Any, frame: Any, before: set) -> None: ...
    def on_params_added(self, module: Any, params: list, where: Any) -> None: ...
    def on_save(self, obj: Any, f: Any) -> None: ...
    def on_load(self, f: Any, kwargs: dict) -> None: ...
    def on_file_write(self, path: Any) -> None: ...
    def on_exit(self) -> None: ...
    def on_forward_failed(self, module: Any, exc: BaseException, where: Any) -> None: ...
    def on_error(self, exc: BaseException) -> Diagnosis | None: ...

    # Cross-rank methods (under torchrun, at exit; see the module docstring).
    def rank_facts(self) -> Any: ...
    def on_ranks(self, facts: dict[int, Any]) -> None: ...
