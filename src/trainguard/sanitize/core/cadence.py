"""Which optimizer steps the checks see: every step until the loop settles, then a sample.

A training loop repeats one cycle of calls per optimizer step: ``zero_grad``, the model's forward,
the loss, ``backward``, ``step``. Once that cycle has run ``settle_after`` times in a row with the
same calls from the same lines in the same modes (for a model call, also the line that called the
function making it and the DataLoader iterated last), and the checks reported nothing during them and
follow nothing (no check armed), the steps that repeat it exactly are *settled*: their calls still
go through the wrappers, which keep the watcher's counters exact (steps, backward calls, forwards)
and compare each call's key with the settled cycle, but the checks are not called. One cycle in
``every`` (16) is checked in full, so what only data reveals (gradients that stop being zeroed, a
per-epoch schedule stepped per batch) is still seen, at most ``every`` steps late; after
``later_after`` (8) such samples in a row found nothing and the same cycle, one in
``every_later`` (32), until the loop settles again after checked cycles (an evaluation pass, a new
epoch's first steps when they differ). A sampled cycle costs several settled ones: over a long
settled stretch this halves that part of the cost.

The first call that differs from the settled cycle (an evaluation pass, ``model.eval()``, a forward
under ``torch.no_grad()``, a new line, other loss shapes, a call raising) ends the settled state
before the checks would have seen it: that call and every later one go to the checks, until the loop
settles again. A loop that comes back to a cycle it had settled on before (training again after an
epoch's evaluation pass, as Lightning's and Hugging Face's trainers run every epoch) settles again
after ``resettle_after`` (2) identical clean cycles instead of ``settle_after``: the checks saw
that exact cycle clean ``settle_after`` times already, and any call that differs from it still
goes to them. Sooner still, a cycle that is the settled one with other calls inserted in one
place (the evaluation pass itself, run between one step's ``zero_grad`` and the next forward) is
the loop back in its cycle once its calls after the interlude went to the checks: it settles at
once (unless a check reported, held or is armed; the same interlude again in the next cycle is a
new cycle, settled like one). Checks are told with ``on_resume(boundary)`` that they did not see
some calls: ``boundary`` is True when they resume at the start of a cycle, False when the calls of
the cycle in progress up to this one were not seen.

A step in which any check reports or holds (``Check.hold``: it is gathering evidence over several
steps, such as graphs of earlier steps still alive), or a cycle that differs from the one before,
never settles: a bug that shows on every step is reported on every step, so counts stay exact. The
first ``settle_after`` (8) steps of a loop are always checked, which covers the checks that decide
within their first steps (a cut gradient path in 3 steps, parameters outside the optimizer at
step 6).

The cycle boundary is the end of ``step()`` of one optimizer (the first one seen stepping), so a
GAN's two optimizers or gradient accumulation over micro-batches make one cycle. When that optimizer
is freed (a new one per training phase or per fold), or has not stepped for half of ``_LONGEST``
calls, the next optimizer that steps takes its place.

A loop without an optimizer step has a boundary too, so every loop shape gets the same sampling:
a loop that updates its parameters by hand (``p.data.add_(p.grad, alpha=-lr)``, pytorch/examples'
word_language_model) is bounded by the end of its backward, once a backward from the same line
has run twice with no optimizer step between them; an inference loop (no backward at all) by the
end of its model's outermost forward, likewise. The first optimizer step takes the boundary over
(``level``: forward < backward < optimizer step). A stretch of ``_LONGEST`` calls without the
boundary drops it, so that, say, a long evaluation pass after training is bounded by its forward.
Calls made inside ``optimizer.step()`` (an LBFGS closure) never bound a cycle: the step does.

Inside a cycle, blocks of calls that end with a backward and repeat back to back (the closure
evaluations of one LBFGS step, the micro-batches of gradient accumulation) count once, whatever the
number of repeats: an LBFGS step that evaluates its closure 14 times repeats one that evaluated it
20 times, and settled steps match any number of repeats of the block.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable

__all__ = ["Cadence", "FORWARD", "BACKWARD", "STEP"]

_LONGEST = 4096  # keys in one cycle at most; a longer "cycle" has no step boundary worth settling
_END = object()  # ends the settled cycle in ``Cadence._match``: equal to no key
FORWARD, BACKWARD, STEP = 1, 2, 3  # what bounds the cycles (``Cadence.level``), weakest first


def _compressed(keys: list[Any]) -> tuple[list[Any], dict[int, int]]:
    """``keys`` with back-to-back repeats of a block ending with a backward (a key ``("B", ...)``)
    kept once, and ``{index after such a block: index of its start}`` in the result (where a
    settled cycle may go back for another repeat)."""
    blocks: list[list[Any]] = []
    block: list[Any] = []
    for key in keys:
        block.append(key)
        if type(key) is tuple and key and key[0] == "B":
            blocks.append(block)
            block = []
    if len(blocks) < 2:
        return keys, {}
    flat: list[Any] = []
    loops: dict[int, int] = {}
    i = 0
    while i < len(blocks):
        j = i + 1
        while j < len(blocks) and blocks[j] == blocks[i]:
            j += 1
        start = len(flat)
        flat.extend(blocks[i])
        if j - i > 1:
            loops[len(flat)] = start
        i = j
    flat.extend(block)
    return flat, loops


class Cadence:
    """The settle / sample state machine the wrappers consult (``see``) on every keyed call.

    Args:
        settle_after: identical clean cycles in a row before steps are settled.
        resettle_after: the same for a cycle the loop had settled on before (at most
            ``settle_after``).
        every: while settled, one cycle in ``every`` is checked in full...
        every_later: ... and one in ``every_later`` (default ``2 * every``; 1 when ``every`` is 1)
            once ``later_after`` samples in a row found the settled cycle clean and unchanged (a
            long settled stretch; it starts over whenever the loop settles again after checked
            cycles).
        enabled: False checks every step (``trainguard run --every-step``).
        resume: called with ``boundary`` when the checks resume after calls they did not see.
        settle: called when the checks stop seeing calls: the loop settles, or settles again after
            a sampled cycle.

    Attributes:
        skipping: the current cycle repeats the settled one so far; its calls are not checked.
        level: what bounds the cycles: 0 (nothing yet), ``FORWARD``, ``BACKWARD`` or ``STEP``.
        steps_skipped: cycles that were not checked (optimizer steps of the boundary optimizer;
            in a loop without one, its backward or forward calls).
    """

    def __init__(self, *, settle_after: int = 8, every: int = 16, every_later: int | None = None,
                 later_after: int = 8, resettle_after: int = 2, enabled: bool = True,
                 resume: Callable[[bool], None] | None = None,
                 settle: Callable[[], None] | None = None) -> None:
        if every_later is None:  # twice as sparse (every == 1 stays 1: every cycle checked)
            every_later = 2 * every if every > 1 else 1
        if settle_after < 1 or every < 1 or every_later < 1 or later_after < 0 or not (
                1 <= resettle_after <= settle_after):
            raise ValueError("settle_after, every and every_later must be at least 1, "
                             "later_after at least 0, resettle_after from 1 to settle_after")
        self.enabled = enabled
        self.settle_after = settle_after
        self.resettle_after = resettle_after
        self._known: list[list[Any]] = []  # the cycles settled on so far (the last 4)
        self.every = every
        self.every_later = every_later
        self.later_after = later_after
        self._samples = 0  # clean samples in a row since the loop last settled after a streak
        self._resume = resume
        self._on_settle = settle
        self.skipping = False
        self.level = 0  # what bounds the cycles: 0 (nothing yet), FORWARD, BACKWARD or STEP
        self.steps_skipped = 0
        self.settled = 0  # times the loop settled (for the summary and tests)
        self._match: list[Any] = [_END]  # the settled cycle's keys, then _END (``see`` needs no
        # bounds test)
        self._loops: dict[int, int] = {}  # in _match: end of a repeatable block -> its start
        self._last_loops: dict[int, int] = {}
        self._pos = 0  # keys of the settled cycle matched so far in this one
        self._cur: list[Any] = []  # keys of the cycle in progress while checking
        self._last: list[Any] | None = None  # the previous complete cycle's keys
        self._streak = 0
        self._clean = True  # no check held, no call went unseen but a settled cycle's start
        self._unseen = False  # the checks resumed in the middle of this cycle
        self._last_interlude: Any = None  # (cycle, steps_skipped) of the last ``_interlude``
        self._sampling = False  # this cycle is a settled run's sample
        self._countdown = 0
        self._primary: Any = None  # the boundary: id() of the optimizer, or a call's key
        self._primary_ref: Any = None  # weak reference to that optimizer
        self._candidates: dict[int, Any] = {}  # level -> the key that ended a cycle last
        self._reports_at = 0

    def see(self, key: Any) -> bool:
        """Whether the call ``key`` describes goes to the checks (True) or is settled (False)."""
        if self.skipping:
            pos = self._pos
            if self._match[pos] == key:
                self._pos = pos + 1
                return False
            back = self._loops.get(pos) if self._loops else None
            if back is not None and self._match[back] == key:  # the block repeats once more
                self._pos = back + 1
                return False
            self._unsettle(key)
            return True
        if self.enabled:
            cur = self._cur
            cur.append(key)
            if len(cur) > _LONGEST:
                del cur[:]
                self._clean = False
                self.level = 0  # no boundary in that long: the next one to repeat bounds cycles
                self._candidates.clear()
        return True

    def hold(self) -> None:
        """A check gathers evidence across steps: the cycle in progress does not count as clean."""
        self._clean = False

    def _unsettle(self, key: Any) -> None:
        boundary = self._pos == 0
        self._cur = self._match[:self._pos] + [key]
        self.skipping = False
        self._sampling = False
        self._clean = True
        self._unseen = not boundary  # a cycle whose start went unseen never counts as clean...
        # (...but may be the settled cycle with an interlude: see ``_interlude``)
        self._streak = 0
        self._pos = 0
        if self._resume is not None:
            self._resume(boundary)

    def boundary(self, optimizer: Any, reports: int, armed: bool) -> None:
        """``optimizer.step()`` returned (after its ``on_step`` went to the checks, if it did).

        ``reports``: the watcher's count of report calls so far; ``armed``: some check follows
        something (it must see the next steps).
        """
        if not self.enabled:
            return
        key = id(optimizer)
        if self.level < STEP:
            self._adopt(optimizer)
        if key != self._primary:
            if self._primary_ref() is None or (not self.skipping
                                               and len(self._cur) >= _LONGEST // 2):
                # the first optimizer is gone (a new one per phase or per fold), or no longer
                # steps: this one bounds the cycles from now on, from its next step
                self._adopt(optimizer)
                self._cur = []
            return
        if self.skipping and self._countdown > 1 and self._pos == len(self._match) - 1:
            # a settled cycle like the one before (the usual case, kept without a call)
            self.steps_skipped += 1
            self._pos = 0
            self._countdown -= 1
            return
        self._end(("end", key), reports, armed)

    def call_end(self, level: int, key: Any, reports: int, armed: bool) -> None:
        """A call that may bound cycles in a loop without optimizer steps returned: a backward
        (``level`` BACKWARD) or a model's outermost forward (FORWARD), made from the place ``key``
        names. The wrappers call it only while ``self.level <= level`` and outside
        ``optimizer.step()``."""
        if not self.enabled or self.level > level:
            return
        if self.level == level:
            if key == self._primary:
                self._end(("end", key), reports, armed)
            elif not self.skipping and len(self._cur) >= _LONGEST // 2:
                self._primary = key  # another line bounds them now, from its next call
                self._cur = []
            return
        # A call of this kind ended twice from one place with nothing stronger between: it
        # bounds the cycles from now on, the calls since its first end being the first cycle
        if self._candidates.get(level) == key:
            self.level, self._primary = level, key
            self._primary_ref = None
            self._candidates.clear()
            self._end(("end", key), reports, armed)
        else:
            self._candidates[level] = key

    def _end(self, end: Any, reports: int, armed: bool) -> None:
        """The boundary call returned: a cycle ended (``end`` is its key for a cycle cut short)."""
        if self.skipping:
            if self._pos != len(self._match) - 1:  # fewer calls than the settled cycle made
                self._unsettle(end)
                self._cur = []
                self._reports_at = reports
                return
            self.steps_skipped += 1
            self._pos = 0
            self._countdown -= 1
            if self._countdown <= 0:
                self.skipping = False
                self._sampling = True
                self._cur = []
                self._clean = True
                self._unseen = False
                self._reports_at = reports
                if self._resume is not None:
                    self._resume(True)
            return
        cycle, self._cur = self._cur, []
        quiet = self._clean and reports == self._reports_at and not armed
        clean = quiet and not self._unseen
        self._clean, self._unseen = True, False
        self._reports_at = reports
        # (cycles that differ only in how often a block repeats are alike; the settled cycle may
        # repeat every block that repeated in one of them)
        cycle, loops = _compressed(cycle)
        if self._sampling:
            self._sampling = False
            if clean and cycle == self._match[:-1]:
                self._loops = {**self._loops, **loops}
                self._samples += 1
                self._settle()
                return
            self._streak = 0
        if quiet and (cycle, self.steps_skipped) != self._last_interlude and self._interlude(
                cycle):
            # the settled cycle with other calls inserted (an epoch's evaluation pass), its own
            # calls as before: the loop is back in it, settled again at once (the same interlude
            # in the next cycle too, with no settled cycle between, is a new cycle: it settles
            # like one)
            self._last_interlude = (cycle, self.steps_skipped)
            self._streak = 0
            self.settled += 1
            self._samples = 0
            self._settle()
            return
        if clean and cycle == self._last:
            self._streak += 1
            self._last_loops = {**self._last_loops, **loops}
        else:
            self._streak = 1 if clean else 0
            self._last, self._last_loops = cycle, loops
        if self._streak >= (self.resettle_after if cycle in self._known else self.settle_after):
            self._match = [*cycle, _END]
            self._loops = self._last_loops
            self.settled += 1
            self._samples = 0
            if cycle not in self._known:
                self._known = [*self._known[-3:], cycle]
            self._settle()

    def _interlude(self, cycle: list[Any]) -> bool:
        """Whether ``cycle`` is the cycle settled on last with calls inserted in one place: its
        keys, in order, with a run of others between a common start and a common end."""
        known = self._match[:-1]
        n = len(known)
        if not n or len(cycle) <= n:
            return False
        head = 0
        while head < n and cycle[head] == known[head]:
            head += 1
        tail = 0
        while tail < n - head and cycle[-1 - tail] == known[-1 - tail]:
            tail += 1
        return head + tail == n

    def _adopt(self, optimizer: Any) -> None:
        self.level = STEP
        self._primary = id(optimizer)
        try:
            self._primary_ref = weakref.ref(optimizer)
        except TypeError:  # an optimizer-like object without weak references: never seen dead
            self._primary_ref = lambda: optimizer

    def _settle(self) -> None:
        self._pos = 0
        self._countdown = (self.every if self._samples < self.later_after
                           else self.every_later) - 1
        if self._countdown <= 0:  # every == 1: check every cycle, yet keep the bookkeeping
            self._sampling = True
            return
        self.skipping = True
        if self._on_settle is not None:
            self._on_settle()
