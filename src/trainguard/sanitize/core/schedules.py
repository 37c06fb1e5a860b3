"""LR-schedule arithmetic for TG305: how fast ``StepLR``, ``MultiStepLR``, ``ExponentialLR`` and
``ReduceLROnPlateau`` cut the rate, what a number of their steps does to it, and how to say so;
how long ``CosineAnnealingLR``, ``PolynomialLR`` and a decaying ``LinearLR`` take to run their
course (``T_max``, ``total_iters``).

Schedules follow ``torch.optim.lr_scheduler`` (https://pytorch.org/docs/stable/optim.html): a
``StepLR`` multiplies the rate by ``gamma`` every ``step_size`` steps, a ``MultiStepLR`` at each
milestone (``milestones`` is a Counter), an ``ExponentialLR`` every step; a ``ReduceLROnPlateau``
multiplies it by ``factor`` after more than ``patience`` calls without a new best.
"""

from __future__ import annotations

import math
from typing import Any

from trainguard.sanitize.core.bounds import live_objects

class Mark:
    """Where a scheduler stood at the start or the end of a DataLoader pass."""

    __slots__ = ("last_epoch", "given", "lrs", "step")

    def __init__(self, last_epoch: int, given: int, lrs: tuple[float, ...], step: int) -> None:
        self.last_epoch = last_epoch  # the scheduler's step() calls so far
        self.given = given  # batches the pass had given
        self.lrs = lrs  # the optimizer's learning rates, per parameter group
        self.step = step  # optimizer steps completed (all optimizers)

    @staticmethod
    def now(scheduler: Any, given: int, step: int | None) -> "Mark":
        lrs = tuple(float(g["lr"]) for g in scheduler.optimizer.param_groups)
        return Mark(int(getattr(scheduler, "last_epoch", 0)), given, lrs, int(step or 0))


PLATEAU_FIX = ("call scheduler.step(metric) once per epoch, after the batch loop, with a "
                "validation metric or the epoch's mean loss; to step it per iteration, give "
                "patience and cooldown in iterations (at least len(loader))")


def plateau_cuts(scheduler: Any, epoch: int, what: str, stepped: int, per_pass: float,
                  cut: float, start: "Mark", end: "Mark") -> str:
    """The finding's message when a ``ReduceLROnPlateau`` stepped per batch ``stepped`` times over
    epoch ``epoch`` (``what``) cut the rate in it with a patience shorter than an epoch's calls
    (``per_pass``), or ""."""
    patience = int(getattr(scheduler, "patience", 0))
    factor = float(getattr(scheduler, "factor", 0.1))
    if patience >= per_pass or cut >= 1 - 1e-9 or not 0.0 < factor < 1.0:
        return ""
    cuts = max(1, round(math.log(cut) / math.log(factor)))
    times = {1: "once", 2: "twice"}.get(cuts, f"{cuts} times")
    return (f"ReduceLROnPlateau(patience={patience}, cooldown={scheduler.cooldown}, "
            f"factor={factor:g}) is stepped per batch: it stepped {stepped} times during epoch "
            f"{epoch} ({what}), and it counts patience and cooldown in step() calls, so "
            f"{patience + 1} batches without a new best cut the rate: the rate was cut {times} in "
            f"epoch {epoch} (from {start.lrs[0]:.3g} to {end.lrs[0]:.3g})")


def cuts(scheduler: Any, cut: float) -> str:
    """``was cut 2 times`` (``StepLR``/``MultiStepLR``), ``was multiplied by 0.25``."""
    from torch.optim import lr_scheduler as lrs

    gamma = float(scheduler.gamma)
    if isinstance(scheduler, lrs.ExponentialLR) or not 0.0 < gamma < 1.0:
        return f"was multiplied by {num(cut)}"
    cuts = max(1, round(math.log(cut) / math.log(gamma)))
    return {1: "was cut once", 2: "was cut twice"}.get(cuts, f"was cut {cuts} times")


MAX_PERIOD = 200  # a longer period is a schedule in iterations
MIN_STEPS = 8  # scheduler steps before a collapse counts
COLLAPSED = 1e-9  # learning rate / initial learning rate below which a schedule has collapsed
AHEAD = 40  # steps looked ahead for a collapse (more than settled steps are apart: 32)
DECAYED = 1e-3  # ... and below which one cut per epoch is enough, with a DataLoader to compare


def ratio(scheduler: Any) -> float:
    """The smallest learning rate of ``scheduler``'s optimizer over its initial one."""
    lrs = [float(g["lr"]) for g in scheduler.optimizer.param_groups]
    initial = [float(b) for b in getattr(scheduler, "base_lrs", [])]
    return min((lr / b for lr, b in zip(lrs, initial) if b), default=1.0)


def collapsed(scheduler: Any, calls: int, optimizer_steps: int, ratio: float) -> str:
    """The evidence when ``scheduler`` made ``calls`` steps, one at each of ``optimizer_steps``
    optimizer steps at least (8 at least), and the rate fell below 1e-9 of its initial value; else
    ""."""
    if calls < max(MIN_STEPS, optimizer_steps) or ratio >= COLLAPSED:
        return ""
    return (f"it has stepped at every optimizer step ({calls} times) and the rate has fallen to "
            f"{ratio:.2g} of its initial value: if these steps are batches, "
            f"{pace(scheduler, 'steps')}")


SPENT = 8  # a schedule whose last cut came in the first 1/SPENT of the steps taken is spent early


def spent_early(scheduler: Any, calls: int, optimizer_steps: int) -> str:
    """The evidence when a ``MultiStepLR`` made ``calls`` steps, one at each of
    ``optimizer_steps`` optimizer steps, and its last milestone (at most ``MAX_PERIOD``) was passed
    in the first ``1/SPENT`` of its steps: milestones given in epochs, reached in the first epochs'
    batches, the rest of the run at the floor rate; else ""."""
    milestones = getattr(scheduler, "milestones", None)
    if not milestones or calls < max(MIN_STEPS, optimizer_steps):
        return ""
    last, done = max(milestones), int(getattr(scheduler, "last_epoch", 0))
    if last > MAX_PERIOD or done < SPENT * last:
        return ""
    return (f"it has stepped at every optimizer step of a batch loop ({calls} times), so it "
            f"passed its last milestone ({last}) at step {last} and the {done - last} steps "
            "since ran at its final rate: milestones meant as epochs were reached within the "
            "first epochs' batches")


def factor_ahead(scheduler: Any, done: int, steps: int) -> float:
    """What the ``steps`` steps after the first ``done`` multiply the rate by."""
    from torch.optim import lr_scheduler as lrs

    gamma = float(scheduler.gamma)
    if isinstance(scheduler, lrs.StepLR):
        return gamma ** ((done + steps) // scheduler.step_size - done // scheduler.step_size)
    if isinstance(scheduler, lrs.MultiStepLR):
        return gamma ** sum(n for m, n in scheduler.milestones.items() if done < m <= done + steps)
    return gamma ** steps


def period(scheduler: Any) -> float | None:
    """Steps until the schedule first cuts the rate (``ExponentialLR``: until it has halved)."""
    from torch.optim import lr_scheduler as lrs

    if isinstance(scheduler, lrs.StepLR):
        return float(scheduler.step_size)
    if isinstance(scheduler, lrs.MultiStepLR):
        return float(min(scheduler.milestones)) if scheduler.milestones else None
    gamma = float(getattr(scheduler, "gamma", 1.0))
    if not 0.0 < gamma < 1.0:
        return None
    return math.log(0.5) / math.log(gamma)


def pace(scheduler: Any, unit: str) -> str:
    """What the schedule does per ``unit`` ("batches" or "steps"), against per epoch."""
    from torch.optim import lr_scheduler as lrs

    if isinstance(scheduler, lrs.StepLR):
        return (f"the rate is multiplied by {scheduler.gamma:g} {every(scheduler.step_size, unit)} "
                f"instead of {every(scheduler.step_size, 'epochs')}")
    if isinstance(scheduler, lrs.MultiStepLR):
        marks = ", ".join(str(m) for m in sorted(scheduler.milestones))
        return f"its milestones fall after {marks} {unit} instead of epochs"
    half = float(num(period(scheduler) or 0.0))
    if half == 1:
        return f"the rate is halved {every(1, unit)} instead of {every(1, 'epochs')}"
    return (f"the rate is multiplied by {scheduler.gamma:g} {every(1, unit)} and halves "
            f"{every(half, unit)} instead of {every(half, 'epochs')}")


def per_pass_factor(scheduler: Any, steps: float) -> float:
    """What the first ``steps`` steps multiply the rate by, counting a fractional last step as
    none (``ExponentialLR``: every step)."""
    from torch.optim import lr_scheduler as lrs

    gamma, whole = float(scheduler.gamma), int(steps)
    if isinstance(scheduler, lrs.StepLR):
        return gamma ** (whole // scheduler.step_size)
    if isinstance(scheduler, lrs.MultiStepLR):
        return gamma ** sum(n for m, n in scheduler.milestones.items() if m <= whole)
    return gamma ** whole


def every(n: float, unit: str) -> str:
    """``every 3 batches``, ``every batch``."""
    return f"every {SINGULAR[unit]}" if n == 1 else f"every {n:g} {unit}"


SINGULAR = {"batches": "batch", "steps": "step", "epochs": "epoch",
             "optimizer steps": "optimizer step"}


def too_fast(scheduler: Any, factor: float) -> bool:
    """Whether one pass multiplying the rate by ``factor`` is beyond a per-epoch schedule: two
    decays or more (``StepLR``/``MultiStepLR``), the rate halved or less (``ExponentialLR``)."""
    from torch.optim import lr_scheduler as lrs

    if isinstance(scheduler, lrs.ExponentialLR):
        return factor <= 0.5
    return factor <= float(scheduler.gamma) ** 2


def describe(scheduler: Any) -> str:
    from torch.optim import lr_scheduler as lrs

    name = type(scheduler).__name__
    if isinstance(scheduler, lrs.StepLR):
        return f"{name}(step_size={scheduler.step_size}, gamma={scheduler.gamma:g})"
    if isinstance(scheduler, lrs.MultiStepLR):
        return f"{name}(milestones={sorted(scheduler.milestones)}, gamma={scheduler.gamma:g})"
    return f"{name}(gamma={scheduler.gamma:g})"


def num(x: float) -> str:
    return f"{x:.3g}"


def scaler_skipped(optimizer: Any) -> bool:
    """A live, enabled ``GradScaler`` that has skipped (or stepped) ``optimizer``."""
    try:
        from torch.amp import GradScaler
    except ImportError:  # very old torch
        return False
    for obj in live_objects(lambda o: GradScaler in type(o).__mro__):
        if not obj.is_enabled():
            continue
        if getattr(obj, "_scale", None) is None:
            continue  # never used
        state = obj._per_optimizer_states.get(id(optimizer))
        if state and getattr(state.get("stage"), "name", "") == "STEPPED":
            return True
        if obj.get_scale() < obj._init_scale:  # it backed off: a step was skipped
            return True
    return False


def epoch_verdict(scheduler: Any, cut: float, stepped: int, per_pass: float, unit: str,
                  epoch: int, *, whole: bool, again: bool, what: str) -> str:
    """The evidence that ``scheduler`` (``StepLR``, ``MultiStepLR``, ``ExponentialLR``), seen
    stepping per batch ``stepped`` times over epoch ``epoch`` (``what``; ``per_pass`` steps in a
    whole epoch; ``whole``: seen from its start; ``cut``: what it multiplied the rate by; ``again``:
    an epoch after the first), cuts the rate too fast for a per-epoch schedule; else ""."""
    first_cut = period(scheduler)
    if first_cut is None or first_cut > MAX_PERIOD:
        return ""
    factor = per_pass_factor(scheduler, per_pass)
    decayed = ratio(scheduler) <= DECAYED * (1 + 1e-6)
    # this epoch, seen whole, cut the rate twice itself: no need to see another one, and too
    # fast whatever the average pace says (step_size 10 in a 19-batch epoch: 1.9 cuts a pass)
    cut_here = whole and too_fast(scheduler, cut * (1 - 1e-6))
    fast = too_fast(scheduler, factor) or cut_here
    if not (fast and (again or cut_here or decayed)) \
            and not (decayed and first_cut <= 0.8 * per_pass):
        return ""
    seen = (f"it stepped {stepped} times during epoch {epoch} ({what}), so "
            f"{pace(scheduler, unit)}")
    if cut < 1 - 1e-9:
        seen += f": the rate {cuts(scheduler, cut)} in epoch {epoch}"
    elif fast:
        seen += f": one epoch multiplies the rate by {num(factor)}"
    return seen


class Seen:
    """What one checked ``step()`` of an epoch scheduler saw."""

    __slots__ = ("passes", "steps", "done")

    def __init__(self, passes: dict[int, tuple[int, int, bool]], steps: int, done: int) -> None:
        self.passes = passes  # DataLoader passes alive: {number: (batches given, len, again)}
        self.steps = steps  # the scheduler's last_epoch
        self.done = done  # optimizer steps completed


def length(scheduler: Any) -> int | None:
    """The steps a schedule of finite length takes to run its course, when it decays the rate
    over them (``CosineAnnealingLR``'s ``T_max``, ``PolynomialLR``'s ``total_iters``, a
    ``LinearLR`` whose ``end_factor`` is below its ``start_factor``); None for the others (a
    ``LinearLR`` warm-up, which holds its last value by design)."""
    from torch.optim import lr_scheduler as lrs

    if isinstance(scheduler, lrs.CosineAnnealingLR):
        found = scheduler.T_max
    elif isinstance(scheduler, lrs.PolynomialLR):
        found = scheduler.total_iters
    elif isinstance(scheduler, lrs.LinearLR) and scheduler.end_factor < scheduler.start_factor:
        found = scheduler.total_iters
    else:
        return None
    return int(found) if found and found > 0 else None


def course_verdict(scheduler: Any, stepped: int, per_pass: float, unit: str, epoch: int,
                   last_epoch: int, *, what: str) -> str:
    """The evidence that ``scheduler``, a schedule of finite length (:func:`length`) seen stepping
    per batch ``stepped`` times over epoch ``epoch`` (``what``; ``per_pass`` steps in a whole
    epoch), was given its length in epochs: by the end of that epoch it had stepped
    (``last_epoch``) twice its length or more, so its whole decay ran in the first ``length``
    batches and training went on past it (a cosine rises back to the initial rate at twice its
    length; the others sit at their floor); else ""."""
    steps = length(scheduler)
    if steps is None or per_pass < 2 or last_epoch < 2 * steps:
        return ""
    from torch.optim import lr_scheduler as lrs

    name = type(scheduler).__name__
    if isinstance(scheduler, lrs.CosineAnnealingLR):
        given, after = (f"{name}(T_max={steps})",
                        "then the rate climbs back towards its initial value and oscillates with "
                        f"a period of {2 * steps} {unit}")
    else:
        given, after = (f"{name}(total_iters={steps})",
                        "then the rate sits at its floor for the rest of training")
    return (f"{given} is a schedule of {steps} steps stepped per batch: it stepped {stepped} times "
            f"during epoch {epoch} ({what}; {last_epoch} steps so far), so its whole decay ran "
            f"in the first {steps} {unit}, as if its length were given in epochs; {after}")


COURSE_FIX = ("give the schedule's length in batches (T_max or total_iters = epochs * "
              "len(loader)) when stepping it per batch, or call scheduler.step() once per epoch, "
              "after the batch loop")


def against_loader(scheduler: Any, period: float, earlier: Seen, now: Seen,
                    ratio: float, total: list[int]) -> str:
    """What shows ``scheduler`` (of first cut after ``period`` steps, its rate at ``ratio`` of
    the initial one) stepped per batch of a DataLoader pass between two checked steps
    (``earlier``, ``now``), or ""; ``total`` sums [scheduler steps, batches] over them."""
    stepped, optimizer_steps = now.steps - earlier.steps, now.done - earlier.done
    if stepped < 1:
        return ""
    # the training pass: one running at both steps (not restarted since) that gave at least a
    # batch per scheduler step in between; of several (zip() of two loaders), the shortest
    fed = [(length, given - earlier.passes[n][0], again)
           for n, (given, length, again) in now.passes.items()
           if n in earlier.passes and given - earlier.passes[n][0] >= stepped]
    if not fed:
        return ""
    length, batches, again = min(fed)
    # per batch: with every optimizer step, or (a GAN's two optimizers) with every batch; an
    # "epoch" of a few batches, drawn from one long pass or beside a long-lived stream, steps
    # far less often than either
    if stepped < optimizer_steps and stepped < batches:
        return ""
    # scheduler steps per epoch: fewer than batches with gradient accumulation, counted over
    # every checked step so far (an epoch's last, short accumulation is one batch per step)
    total[0] += stepped
    total[1] += batches
    per_pass = length * total[0] / total[1]
    factor = per_pass_factor(scheduler, per_pass)
    if length < 2 or per_pass < 2:
        return ""
    # A DataLoader iterated once more is iterated per epoch: what one pass would do is enough.
    # A first pass may be an iterator kept across epochs and read a batch at a time (a
    # monitoring batch per epoch, a domain-adaptation target stream): the rate must already be
    # 1000x down. Either way one cut per epoch counts only with the rate that far down and a
    # period clearly under the epoch (step_size=len(loader) per batch is per epoch).
    decayed = ratio <= DECAYED * (1 + 1e-6)  # (0.1 ** 3 is a little over 1e-3)
    fast = too_fast(scheduler, factor)
    if not (fast and (again or decayed)) and not (decayed and period <= 0.8 * per_pass):
        return ""
    unit = "batches" if total[0] == total[1] else "optimizer steps"
    seen = (f"it steps about {per_pass:.0f} times per pass over a DataLoader of {length} "
            f"batches, so {pace(scheduler, unit)}")
    if fast:
        seen += f": one epoch multiplies the rate by {num(factor)}"
    return seen
