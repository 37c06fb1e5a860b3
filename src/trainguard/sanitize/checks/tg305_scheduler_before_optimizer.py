"""TG305 scheduler-before-optimizer: ``lr_scheduler.step()`` before the first ``optimizer.step()``,
or a per-epoch scheduler stepped per batch.

What it watches: the ``step()`` calls user code makes on LR schedulers (the first one on each
scheduler, then those of the checked steps; for ``SequentialLR``/``ChainedScheduler``, their
children), whether the scheduler's optimizer has stepped by then, and each DataLoader pass: the
iterator its ``__iter__`` returned (weakly held), whose ``_num_yielded`` counts the batches it has
given, so no hook runs per batch.

When it fires:
- the scheduler stepped while its optimizer never had, and no ``GradScaler`` skipped that
  optimizer's step. The schedule then starts one value late: the first learning rate (often the
  warm-up's smallest) is never used, and with a per-iteration ``scheduler.step()`` placed before
  ``optimizer.step()`` every step uses the next step's rate. Reported at the optimizer's first
  step, where the two calls' order is set (``core/order_site.py``: a loop calling a helper that
  steps the schedulers before the one that steps the optimizer, at that call);
- a ``StepLR``, ``MultiStepLR`` or ``ExponentialLR`` (schedules written in epochs: "divide by 10
  every 30 epochs") is stepped per batch, so the learning rate is cut several times per epoch and
  soon reaches nothing. Its period (``step_size``, the first milestone, or the steps
  ``ExponentialLR`` takes to halve the rate) must be at most 200 steps. Between two checked
  ``step()`` calls, one DataLoader pass with a length (not restarted in between) must have given
  at least one batch per scheduler step, and the scheduler must have stepped with every optimizer
  step or (a GAN's two optimizers) with every batch of that pass: that pass is the training epoch
  (of several, as with ``zip()`` of two loaders, the shortest). Its length times the scheduler
  steps per batch given, summed over the checked steps (fewer than one with gradient
  accumulation), is the scheduler's steps per epoch. It fires when those steps cut the rate twice
  or more (``StepLR``, ``MultiStepLR``) or halve it (``ExponentialLR``) in one epoch and the
  DataLoader had a pass before (it is iterated per epoch) or the rate is already below 1e-3 of
  its initial value; or when they cut it once, with a period under 0.8 of the epoch, and the rate
  is below 1e-3. Without such a pass (batches sliced by hand, a loader without a length,
  ``itertools.cycle``), it fires once the scheduler has stepped at every optimizer step since it
  was first seen (8 steps at least) and the rate is below 1e-9 of its initial value. Reported at
  the scheduler's ``step()`` line, once per scheduler; on a line already reported for stepping
  before the optimizer, the one finding says both. Two checked steps must fall within one pass:
  with settled steps checked one in 16 (then one in 32), an epoch of fewer than 16 optimizer steps
  (32 on a long settled stretch) is not seen by this rule (the pass rule below sees it). A
  checked step that finds the rate will fall below 1e-9 of its initial value within the next 40
  steps (the scheduler having stepped at every optimizer step) keeps those steps
  checked (``Check.hold``): the fall is seen where it happens, with two checked steps in one pass,
  even in a run that ends soon after;
- the same schedules judged over whole DataLoader passes, whatever the checked steps: where each
  stands (its ``last_epoch``, the learning rates, the optimizer steps) is noted as a pass of a
  DataLoader with a length starts (or, for a scheduler first seen mid-pass, at its first step) and
  as the pass ends (its iterator released, or the DataLoader's next pass starting:
  ``core/passes.py``), and the pass is judged at the next pass or at exit. It counts when the pass
  gave all its batches (2 at least), the scheduler stepped twice or more in it, with every
  optimizer step or with every batch while the optimizers stepped at most once per batch each,
  and the rules above hold for its steps per epoch; a pass that itself cut the rate twice
  (halved it, ``ExponentialLR``) needs no earlier pass. Epochs shorter than the checked-step
  spacing are seen this way from the first epoch. Where batches are sliced by hand (no
  DataLoader), the epoch is the interval between two ``train()`` calls on a model (``on_mode``:
  once per epoch in most loops, once per step in a Hugging Face ``Trainer``, whose intervals of
  one step are never judged), and also between two returns of a model from ``eval()`` to
  ``train()`` with no DataLoader pass begun in between (a validation ends the epoch, where
  ``train()`` runs at every step): the scheduler must have stepped with every optimizer step in
  it (2 at least), and the same rules hold for its steps in that interval;
- a ``ReduceLROnPlateau`` stepped per batch (a "batch end" callback calling
  ``scheduler.step(loss)`` with the mini-batch loss): its ``patience`` and ``cooldown`` count
  ``step()`` calls, so with a patience shorter than an epoch's calls noisy batches cut the rate
  within the first epochs. Judged over whole passes or ``train()`` intervals as above: it counts
  when the scheduler stepped per batch in one, its patience is below that epoch's calls, and the
  rate was cut during it.
- a schedule of finite length given in epochs and stepped per batch: ``CosineAnnealingLR``
  (``T_max``), ``PolynomialLR`` and a decaying ``LinearLR`` (``total_iters``). Judged over whole
  passes or ``train()`` intervals as above: it counts when the scheduler stepped per batch in one
  and, by its end, had stepped twice its length or more: its whole decay ran in the first
  ``T_max`` batches, and the rate then climbs back and oscillates (a cosine) or sits at its floor.
Every per-batch finding is at the scheduler's ``step()`` line (the latest seen), with the symptom
(the rate cut N times in epoch E) in the message.

Silent on: a ``ReduceLROnPlateau`` stepped once per epoch (on a validation metric or the epoch's
mean loss), or per iteration by design with its patience in iterations (at least an epoch's calls);
a pass left early (``zip()`` with a shorter loader, a ``break`` after so many steps), which is not
an epoch. Also silent on: the canonical order (``optimizer.step()`` then ``scheduler.step()``),
OneCycle/Cyclic/warm-up schedulers stepped per batch (per-batch stepping is their design; only the
order is checked), and the first steps of an AMP run whose ``GradScaler`` skipped
``optimizer.step()`` because of inf/NaN gradients (PyTorch's own warning misfires there): a live
``GradScaler`` whose scale has backed off below its initial value, or that has stepped this
optimizer, means a skip.

Silent on schedules written in iterations and stepped per batch: a period over 200 steps
(``step_size=30 * len(loader)``, milestones in the thousands, ``ExponentialLR`` with a gamma near
1), a period of at least half an epoch (``len(dataset) // batch_size``, a period in optimizer steps
with gradient accumulation), ``CosineAnnealingLR``/``PolynomialLR``/``LinearLR`` whose length
covers the steps taken (``T_max=epochs * len(loader)``), ``CosineAnnealingWarmRestarts``
(restarts are its design), ``LambdaLR`` and ``LinearLR`` warm-ups
(torchvision's detection reference steps a warm-up per iteration in the first epoch, then a
``MultiStepLR`` per epoch); validation passes read inside the batch loop, whole or in part; an
iterator kept across epochs and read a batch or two per epoch (a monitoring batch, a
domain-adaptation target stream); a DataLoader of a single batch (per batch is then per epoch);
full-batch training (a step is an epoch) until the rate is below 1e-9 of its initial value. A
schedule that is itself in iterations, with a period of 200 steps or less, that cuts the rate
twice per epoch is reported: it cannot be told from the mistake.

Cost: per scheduler step the user makes (checked), the optimizer's learning rates and the last 16
DataLoader passes; per DataLoader pass, at its start and its end, a few attribute reads per
per-epoch or plateau scheduler seen (one callback when its iterator is released), and as much per
``train()`` call; on the rare path
of a first scheduler step before any optimizer step, one scan of the heap for a GradScaler
(``bounds.live_objects``).

Reference: ``torch.optim`` "How to adjust learning rate" (call ``scheduler.step()`` after
``optimizer.step()``) https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate; GitHub
issues https://github.com/gjy3035/C-3-Framework/issues/96 and, for the GradScaler false alarm,
https://github.com/kekmodel/MPL-pytorch/issues/38; per-batch stepping: "Scheduler should step after
the end of each epoch, not after every iteration" (https://github.com/pytorch/pytorch/issues/3814),
https://github.com/ivadomed/ivadomed/pull/55 and https://github.com/pytorch/tutorials/pull/640;
epoch milestones per iteration: https://github.com/facebookresearch/detectron2/issues/2058;
plateau per batch: https://github.com/IntelLabs/distiller/issues/161,
https://github.com/Lightning-AI/pytorch-lightning/issues/1156 (``torch.optim.ReduceLROnPlateau``:
"patience: the number of allowed epochs with no improvement"); cosine length in epochs per batch:
https://github.com/ivadomed/ivadomed/issues/57, https://github.com/konstmish/prodigy/issues/4.
"""

from __future__ import annotations

import weakref
from typing import Any

from trainguard.sanitize.core import schedules as pace
from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.frames import user_location
from trainguard.sanitize.core.order_site import EarlySteps
from trainguard.sanitize.core.callstack import user_stack
from trainguard.sanitize.core.train_once import loop_depth


class SchedulerBeforeOptimizer(EarlySteps, Check):
    code = "TG305"
    on_demand = ("on_step_pre",)  # only while a scheduler stepped before its optimizer

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.checked: "weakref.WeakSet[Any]" = weakref.WeakSet()
        # scheduler -> its step() seen before its optimizer's first step, not yet reported
        self.early: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()
        from torch.optim import lr_scheduler as lrs

        self.epoch_types = (lrs.StepLR, lrs.MultiStepLR, lrs.ExponentialLR)
        self.wrappers = (lrs.SequentialLR, lrs.ChainedScheduler)
        self.plateau = lrs.ReduceLROnPlateau
        # schedules of finite length (T_max, total_iters), judged over whole passes only
        self.course_types = (lrs.CosineAnnealingLR, lrs.PolynomialLR, lrs.LinearLR)
        # epoch schedulers -> what their latest and their first checked step saw
        self.latest: "weakref.WeakKeyDictionary[Any, pace.Seen]" = weakref.WeakKeyDictionary()
        self.first: "weakref.WeakKeyDictionary[Any, pace.Seen]" = weakref.WeakKeyDictionary()
        # epoch schedulers -> [scheduler steps, batches of the pass feeding them] between checked
        # steps, summed
        self.fed: "weakref.WeakKeyDictionary[Any, list[int]]" = weakref.WeakKeyDictionary()
        self.reported: "weakref.WeakSet[Any]" = weakref.WeakSet()
        # scheduler -> (its scheduler-before-optimizer finding, the line reported), if any
        self.order: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()
        # per-epoch and plateau schedulers seen stepping -> the user's latest step() line seen
        self.step_at: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()
        # ... and each of its step() lines -> [calls, location] (stepped per batch at one line
        # and per epoch at another: the per-batch line, the one called most, is reported)
        self.sites: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()
        # id(DataLoader) -> {scheduler: where it stood} for that DataLoader's pass in progress
        self.open: dict[int, "weakref.WeakKeyDictionary[Any, pace.Mark]"] = {}
        # passes ended since the last event: (pass, scheduler, where it stood at the start,
        # where at the end)
        self.ended: list[tuple[Any, Any, pace.Mark, pace.Mark]] = []
        self.failed: Exception | None = None  # raised by a pass's end, reported at an event
        # id(model) -> (its train() calls so far, {scheduler: where it stood at the latest one});
        # -id(model) -> (its returns from eval mode, {...}, DataLoader passes begun by then)
        self.trained: dict[int, tuple[int, Any, int]] = {}
        self.passes_begun = 0
        self.state.pass_listeners.append(self._pass_ended)

    def on_loader_iter(self, loader: Any) -> None:
        """Judge the passes that ended; note where each scheduler stands as ``loader``'s starts."""
        self._judge_ended()
        self.passes_begun += 1
        self.open[id(loader)] = weakref.WeakKeyDictionary(
            (scheduler, pace.Mark.now(scheduler, 0, self.state.step)) for scheduler in self.step_at)

    def on_mode(self, call: Any) -> None:
        """A model set to training mode: judge the intervals since its previous ``train()`` call
        and since it last came back from ``eval()`` (epochs, where batches are sliced by hand)."""
        if not call.mode:
            return
        key = id(call.module)
        count = self._interval(key, "between two train() calls on the model")
        if count == 1 or not call.was_training:
            self._interval(-key, "between two returns of the model from eval() to train()",
                           by_hand=True)

    def _interval(self, key: int, what: str, by_hand: bool = False) -> int:
        """Judge the interval of model ``key`` ended here, start the next; return their count."""
        count, marks, begun = self.trained.get(key, (0, None, 0))
        if marks and not (by_hand and begun != self.passes_begun):
            for scheduler, start in list(marks.items()):
                if scheduler not in self.reported:
                    end = pace.Mark.now(scheduler, 0, self.state.step)
                    self._judge_interval(scheduler, start, end, count, what)
        if len(self.trained) > 128:  # (models dropped)
            self.trained.clear()
        self.trained[key] = (count + 1, weakref.WeakKeyDictionary(
            (scheduler, pace.Mark.now(scheduler, 0, self.state.step))
            for scheduler in self.step_at), self.passes_begun)
        return count + 1

    def on_exit(self) -> None:
        self.early_left()
        for noted in list(self.state.loader_passes):  # exhausted passes whose iterator is kept
            if not noted.ended and noted.length and noted.given >= noted.length:
                self._pass_ended(noted)
        self._judge_ended()

    def _passes(self) -> dict[int, tuple[int, int, bool]]:
        """``{pass number: (batches given so far, len(loader), whether its DataLoader had a pass
        before)}`` of the passes in progress whose loader has a length."""
        return {p.number: (p.given, p.length, p.again) for p in list(self.state.loader_passes)
                if p.length and not p.ended}

    def _pass_ended(self, noted: Any) -> None:
        """Note where the schedulers stand as pass ``noted`` ends (called from a weakref callback:
        nothing is reported here)."""
        try:
            marks = self.open.pop(noted.loader_id, None)
            if marks:
                for scheduler, start in list(marks.items()):
                    end = pace.Mark.now(scheduler, noted.given, noted.step_at_end)
                    self.ended.append((noted, scheduler, start, end))
                del self.ended[:-64]
        except Exception as exc:
            self.failed = exc

    def _judge_ended(self) -> None:
        """Judge every scheduler over the passes that ended since the last event."""
        if self.failed is not None:
            failed, self.failed = self.failed, None
            raise failed
        ended, self.ended = self.ended, []
        for noted, scheduler, start, end in ended:
            if scheduler not in self.reported:
                self._judge_pass(noted, scheduler, start, end)

    def on_scheduler_step(self, scheduler: Any) -> None:
        if isinstance(scheduler, self.wrappers):  # the steps it gives its children are no events
            for child in getattr(scheduler, "_schedulers", ()):
                if not isinstance(child, self.plateau):
                    self._follow(child)
        else:
            self._follow(scheduler)
        if scheduler in self.checked:
            return
        self.checked.add(scheduler)
        optimizer = getattr(scheduler, "optimizer", None)
        if optimizer is None or optimizer in self.state.optimizers:
            return  # it has stepped: the order is right
        if pace.scaler_skipped(optimizer):
            return
        self.note_early(scheduler, optimizer)  # reported at the optimizer's first step

    def _follow(self, scheduler: Any) -> None:
        """Note a per-epoch, plateau or finite-length scheduler's step (judged per pass)."""
        if scheduler in self.reported:
            return
        if isinstance(scheduler, self.epoch_types):
            self._track(scheduler)
            self._per_batch(scheduler)
        elif isinstance(scheduler, self.plateau) or (
                isinstance(scheduler, self.course_types) and pace.length(scheduler) is not None):
            self._track(scheduler)

    def _per_batch(self, scheduler: Any) -> None:
        """Report an epoch schedule stepped per batch (before this ``step()`` runs)."""
        period = pace.period(scheduler)
        if period is None or period > pace.MAX_PERIOD:
            return
        now = pace.Seen(self._passes(), int(getattr(scheduler, "last_epoch", 0)), self.state.step)
        first = self.first.setdefault(scheduler, now)
        earlier, self.latest[scheduler] = self.latest.get(scheduler), now
        ratio = pace.ratio(scheduler)
        seen = ""
        if earlier is not None:
            seen = pace.against_loader(scheduler, period, earlier, now, ratio,
                                         self.fed.setdefault(scheduler, [0, 0]))
        if not seen:
            # no DataLoader pass to compare with (batches sliced by hand, a loader without a
            # length): stepped at every optimizer step since first seen, and the rate collapsed
            # (the step about to run is counted: one more call, its optimizer step done)
            calls, optimizer_steps = now.steps - first.steps + 1, now.done - first.done + 1
            seen = pace.collapsed(scheduler, calls, optimizer_steps, ratio) or (
                pace.spent_early(scheduler, calls, optimizer_steps)
                if loop_depth(user_stack()) >= 2 else "")
            if not seen:
                if calls >= optimizer_steps and \
                        ratio * pace.factor_ahead(scheduler, now.steps, pace.AHEAD) \
                        < pace.COLLAPSED:
                    # the rate falls below the line within the next steps: keep them checked
                    # (settled steps are checked one in 16 or 32), so that the step where it
                    # does is seen, even when the run ends soon after
                    self.hold()
                return
        self._per_batch_found(scheduler, seen, ratio, user_location())

    def _per_batch_found(self, scheduler: Any, seen: str, ratio: float, where: Any) -> None:
        """Report ``scheduler`` as an epoch schedule stepped per batch (``seen``: the evidence),
        at ``where``, its ``step()`` line."""
        lrs = [float(g["lr"]) for g in scheduler.optimizer.param_groups]
        initial = [float(b) for b in getattr(scheduler, "base_lrs", [])]
        now_lr = f"; the learning rate is now {lrs[0]:.3g} (initial {initial[0]:.3g})" \
            if initial and ratio < 1.0 else ""
        message = (f"{pace.describe(scheduler)} is a per-epoch schedule stepped per batch: "
                   f"{seen}{now_lr}")
        fix = ("call scheduler.step() once per epoch, after the batch loop; for a schedule in "
               "iterations, give its period in batches (step_size=30 * len(loader), milestones "
               "times len(loader))")
        self._found(scheduler, message, fix, where)

    def _found(self, scheduler: Any, message: str, fix: str, where: Any) -> None:
        """Report ``scheduler`` stepped per batch at ``where``, its ``step()`` line, once."""
        self.reported.add(scheduler)
        order, order_at = self.order.get(scheduler, (None, None))
        if order is not None and where is not None and order_at[:2] == where[:2]:
            # this line was reported as stepping before the optimizer: the same finding says both
            self.bus.amend(order, message, fix)
        else:
            self.report(message, fix=fix, where=where)

    def _track(self, scheduler: Any) -> None:
        """Note the user's ``step()`` line; the first time, where ``scheduler`` stands in each
        pass in progress (from the batch being processed: this step is counted)."""
        first = scheduler not in self.step_at
        self.step_at[scheduler] = where = user_location()
        sites = self.sites.setdefault(scheduler, {})
        if where is not None and len(sites) < 8:
            sites.setdefault(where[:2], [0, where])[0] += 1
        if not first:
            return
        for noted in list(self.state.loader_passes):
            marks = self.open.get(noted.loader_id)
            if noted.length and not noted.ended and marks is not None and scheduler not in marks:
                marks[scheduler] = pace.Mark.now(scheduler, max(noted.given - 1, 0),
                                                 self.state.step)
        for _, marks, _ in self.trained.values():
            marks.setdefault(scheduler, pace.Mark.now(scheduler, 0, self.state.step))

    def _judge_interval(self, scheduler: Any, start: "pace.Mark", end: "pace.Mark",
                        epoch: int, what: str) -> None:
        """Report ``scheduler`` if it stepped with every optimizer step in an interval (``what``:
        epoch ``epoch``, with batches sliced by hand) and cut the rate within it as the docstring
        says."""
        stepped, optimizer_steps = end.last_epoch - start.last_epoch, end.step - start.step
        if optimizer_steps < 2 or stepped < optimizer_steps:
            return
        self._judge_epoch(scheduler, start, end, stepped, float(stepped), "optimizer steps",
                          epoch, whole=True, again=epoch > 1,
                          what=f"{what}, at every optimizer step")

    def _judge_pass(self, noted: Any, scheduler: Any, start: "pace.Mark", end: "pace.Mark") -> None:
        """Report ``scheduler`` if it stepped per batch during the ended pass ``noted`` and cut
        the rate within an epoch as the docstring says."""
        length = noted.length
        stepped, batches = end.last_epoch - start.last_epoch, end.given - start.given
        optimizer_steps = end.step - start.step
        # a whole pass only: one left early (zip() with a shorter loader, a break after so many
        # steps) is not an epoch
        if not length or length < 2 or end.given < length or batches < 2 or stepped < 2:
            return
        # per batch: with every optimizer step (fewer with gradient accumulation), or with every
        # batch while the optimizers stepped about once per batch (a GAN's two); an iterator kept
        # across epochs and read a batch per epoch gives far fewer batches than optimizer steps
        optimizers = max(1, len(self.state.optimizers))
        if not (stepped >= optimizer_steps >= 1
                or (stepped >= batches and optimizer_steps <= batches * optimizers)):
            return
        per_pass = stepped * length / batches  # scheduler steps per epoch
        unit = "batches" if stepped >= batches else "optimizer steps"
        self._judge_epoch(scheduler, start, end, stepped, per_pass, unit, noted.epoch,
                          whole=start.given == 0, again=noted.again,
                          what=f"a pass over a DataLoader of {length} batches")

    def _judge_epoch(self, scheduler: Any, start: "pace.Mark", end: "pace.Mark", stepped: int,
                     per_pass: float, unit: str, epoch: int, *, whole: bool, again: bool,
                     what: str) -> None:
        """Report ``scheduler``, seen stepping per batch ``stepped`` times over epoch ``epoch``
        (``what``; ``per_pass`` steps in a whole epoch; ``whole``: seen from its start), if the
        rate is cut as the docstring says."""
        cut = min((b / a for a, b in zip(start.lrs, end.lrs) if a > 0), default=1.0)
        sites = self.sites.get(scheduler) or {}
        where = max(sites.values(), key=lambda c: c[0])[1] if len(sites) > 1 else \
            self.step_at.get(scheduler)
        if isinstance(scheduler, self.plateau):
            message = pace.plateau_cuts(scheduler, epoch, what, stepped, per_pass, cut, start, end)
            if message:
                self._found(scheduler, message, pace.PLATEAU_FIX, where)
            return
        if isinstance(scheduler, self.course_types):
            message = pace.course_verdict(scheduler, stepped, per_pass, unit, epoch,
                                          end.last_epoch, what=what)
            if message:
                self._found(scheduler, message, pace.COURSE_FIX, where)
            return
        seen = pace.epoch_verdict(scheduler, cut, stepped, per_pass, unit, epoch, whole=whole,
                                  again=again, what=what)
        if seen:
            self._per_batch_found(scheduler, seen, pace.ratio(scheduler), where)
