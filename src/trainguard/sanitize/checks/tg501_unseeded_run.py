"""TG501 unseeded-run: a run that asks to be reproducible draws from a generator it never seeded.

What it watches: the calls that seed or restore the three global generators (``random``, numpy's
``np.random``, torch's default CPU generator) and the determinism switches (``on_repro``). From the
first call that asks for a reproducible run (a fixed seed, a restored state,
``use_deterministic_algorithms(True)``, ``cudnn.deterministic = True``) it keeps a snapshot of each
generator that is not seeded, and compares it with the generator's state at cheap moments: optimizer
steps 1, 2, 4, 8, ..., DataLoader passes 1, 2, 4, ..., a later seeding call of that generator, and
the end of the run (a comparison costs 5-100 us). A changed state means the run drew from that
generator. No drawing function is wrapped.

Draws made by a library's code while it is imported for the first time are not the run's: rich's
``rich/style.py`` (reached by ``import sklearn.metrics``) runs ``count(getrandbits(24))`` at import;
other libraries make a table with ``np.random.rand`` at module level. They change neither the data
order nor the weights. The imports probe (``probes/imports.py``) marks each outermost stretch of
library import-time code (``on_library_import_pre``/``on_library_import``; a library is a module
whose file is not the user's, by the same filter that picks the line a finding points at); when the
stretch ends, the snapshot of each generator the run had not drawn from before it moves to the
state after it. The user's own top-level code stays the user's: a helper module ``data.py`` that
runs ``idx = np.random.permutation(n)`` when imported (also from inside a library's import) counts,
as do draws the run makes by calling a library's function later.

When it fires: a generator the run did not seed was drawn from after the run asked to be
reproducible: runs differ even with the same seed. Reported once per generator, at the user's line
that last asked before the draw was seen, a seeding call rather than a determinism switch set after
it (the seeding in effect: a ``set_seed(cfg)`` helper run
after a ``torch.manual_seed(0)`` at the top; where the missing seed belongs); when the run had seeded it and a later call
reseeded it from the OS (``np.random.seed()`` in an epoch hook), at that call. When the run seeds that generator later, the
finding points at that late seed instead: the draws before it differ every run.

Under a ``trainguard.watch()`` block opened by a script that is already running (and
``fit(guard=True)``), seeding calls made before the block are not seen: a generator is then
presumed seeded unless the block itself reseeds it from the OS. ``trainguard run``/``check`` see
the whole script.

Silent on: runs that seed nothing and set no determinism flag (they have not asked); generators
the run seeds before using them; generators never drawn from (a script that seeds torch and never
touches numpy); draws made by a library's import-time code (a lazy ``from sklearn.metrics import
f1_score`` inside ``evaluate()``, a library imported after the seed), unless the run had already
drawn from that generator; draws made before the first seed (a run may draw its own seed, e.g.
``seed = random.randint(...)``, then seed with it and log it; a model's weights drawn before
torch's first seed and trained unchanged are reported: ``core/early_weights.py``); draws in
DataLoader workers, seeded from a base seed drawn from torch (``_utils/worker.py``); a
``random.seed()`` / ``np.random.seed()`` with no argument counts as unseeding.

Seeding that bypasses the wrapped functions is still seen for torch: ``torch.initial_seed()`` is
noted when the watcher starts (and after each seeding call seen) and compared at the first ask and
at the check moments, so ``torch.default_generator.manual_seed(0)`` counts as seeding torch. Torch
seeding calls inside a ``torch.random.fork_rng()`` block are ignored (the block restores torch's
state: a fixed validation set drawn there does not seed the run nor ask for reproducibility), and
no check moment is taken inside one.

Generator objects: a numpy ``Generator`` the user's code makes without a seed
(``np.random.default_rng()``, or ``default_rng(seed)`` with ``seed`` None: a splitter's default)
is seeded from the OS, and the global seeds never reach it. Its state is kept (at most 32 such
generators, one per line) and compared at the same moments; drawn from after the run asked to be
reproducible, it is reported at the line that made it, where the seed belongs (diningphil/PyDGN#31:
splits that differ although the run is seeded). One made and drawn from before the ask (a run
drawing its own seed to log) is silent.

Not seen: other generator objects (``random.Random()``, ``np.random.RandomState()``), the CUDA
generators (they start from a fixed seed), seeding of numpy or random that bypasses the wrapped
module functions.

Cost: at optimizer steps 1, 2, 4, 8, ... and DataLoader passes 1, 2, 4, ..., one snapshot of each
generator's state (a few kilobytes compared); per seeding call, one snapshot; after the first ask,
two snapshots of each unseeded generator per outermost library import (a module already imported
costs nothing).

Reference: PyTorch's reproducibility notes, "Controlling sources of randomness"
(https://pytorch.org/docs/stable/notes/randomness.html); Novartis/scar#97 (seeding torch alone, or
numpy alone, does not make training reproducible, https://github.com/Novartis/scar/issues/97).
"""

from __future__ import annotations

import sys
from typing import Any

from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.early_weights import weights_drawn_before
from trainguard.sanitize.core.seeding import (DESCRIBE, FAMILIES, HOW, SEEDS, Family, asks,
                                               call_text, fixes_seed, in_fork_rng, reseeded_unseen,
                                               seeding_helper, snapshot, watched_from_start)
from trainguard.sanitize.core.frames import Location, user_frame, user_location


def _initial_seed() -> int | None:
    """``torch.initial_seed()``, or None when torch is not imported."""
    torch = sys.modules.get("torch")
    return torch.initial_seed() if torch is not None else None


_MADE = "numpy.random.default_rng"  # the event of a generator made from the OS
_GENERATORS = 32  # such generators kept to be compared at the check moments


def _state(bit_generator: Any) -> Any:
    """A numpy bit generator's state (a small dict of ints for ``default_rng``'s PCG64), or None
    when it cannot be read."""
    try:
        return bit_generator.state
    except Exception:  # noqa: BLE001 - never raise into the user's run
        return None


def _drawn_from(made: list[Any]) -> bool:
    try:
        return bool(_state(made[0]) != made[2])
    except Exception:  # noqa: BLE001 - a state holding arrays (MT19937) does not compare
        return False


class UnseededRun(Check):
    code = "TG501"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.asked_at: Location | None = None  # the user's line of the first ask
        self.asked_by = ""  # that call, as text
        # the latest ask (the seed in effect when a draw is seen: a seeding helper that runs after
        # a boilerplate torch.manual_seed at the top is where the missing seed belongs)
        self.latest: tuple[Location | None, str] = (None, "")
        self.latest_seeds = False  # ``latest`` is a seeding call, not a determinism switch
        self.seeded: dict[Family, bool] = {f: False for f in FAMILIES}
        self.observed: set[Family] = set()  # generators whose seeding calls were seen
        self.ref: dict[Family, Any] = {}  # snapshot of each unseeded generator since the ask
        self.done: set[Family] = set()
        self.next_step = 1  # looked at steps 1, 2, 4, 8, ... (the first checked one from each)
        self.passes = 0  # DataLoader passes seen
        # torch's initial seed when the watcher started, or after the last seeding call seen: a
        # different one later means torch was seeded by a path no wrapper sees
        # (``torch.default_generator.manual_seed(0)``)
        self.torch_seed = _initial_seed()
        # family -> (line, call) of a reseeding from the OS after the ask (``np.random.seed()``)
        self.reseeded_at: dict[Family, tuple[Location | None, str]] = {}
        # family -> its snapshot since the ask, when a library's import started and the run had
        # not drawn from it yet (the stretch's draws are the library's: see on_library_import)
        self.importing: dict[Family, Any] = {}
        # family -> the last fixed seed value; torch's state right after its last seeding; and a
        # reset of numpy/random to a seed they had before, while torch (drawn from since its own
        # seeding) was left as it was: (line, call, torch's state then, the families reset by
        # the same user function call, that frame's id)
        self.values: dict[Family, Any] = {}
        self.torch_after_seed: Any = None
        self.reset: tuple[Location | None, str, Any, frozenset, int] | None = None
        # numpy Generators the user's code made from the OS (``np.random.default_rng()``):
        # [bit generator, the line that made it, its state since the ask or its making]
        self.generators: list[list[Any]] = []
        # a model's drawn weights at torch's first seeding: (EarlyWeights, call, by a helper)
        self.early: tuple[Any, str, bool] | None = None
        self.early_seen = False  # torch's first fixed seeding was looked at

    def on_repro_pre(self, name: str, value: Any) -> None:
        family = SEEDS.get(name)
        if family == "torch" and not self.early_seen and fixes_seed(name, value):
            self._note_early_weights(name, value)
        if (family is None or self.asked_at is None or self.seeded[family]
                or family in self.done or not fixes_seed(name, value)):
            return
        if self._drawn(family):
            self.done.add(family)
            self.report(
                f"{DESCRIBE[family]} was drawn from after this run asked to be reproducible "
                f"({self.asked_by} at line {self.asked_at[1]}) but before this "
                f"{call_text(name, value)}: those draws differ every run",
                fix=f"seed {family} before its first use, next to {self.asked_by} "
                    f"(line {self.asked_at[1]}), or call trainguard.seed_everything(seed) there")

    def on_repro(self, name: str, value: Any) -> None:
        if name == _MADE:
            self._made(value)
            return
        family = SEEDS.get(name)
        fixed = family is not None and fixes_seed(name, value)
        if fixed and family != "torch" and self._resets_without_torch(family, value) and \
                seeding_helper(user_frame(sys._getframe(1))):
            frame = id(user_frame(sys._getframe(1)))
            families = self.reset[3] if self.reset is not None and self.reset[4] == frame \
                else frozenset()
            self.reset = (user_location(), call_text(name, value), snapshot("torch"),
                          families | {family}, frame)
        if fixed and isinstance(value, int):
            self.values[family] = value  # type: ignore[index]
        if family is not None:
            self.seeded[family] = fixed
            self.observed.add(family)
            if family == "torch":
                self.torch_seed = _initial_seed()
                self.torch_after_seed = snapshot("torch") if fixed else None
                self.reset = None
            if not fixed and self.asked_at is not None:
                self.ref[family] = snapshot(family)  # reseeded from the OS: draws from now count
                # (the cause, when the run had seeded it: that seeding is undone here)
                self.reseeded_at[family] = (user_location(), call_text(name, value))
        if asks(name, value) and not in_fork_rng() and (fixed or not self.latest_seeds):
            # a missing seed goes next to the latest seeding call; a determinism switch
            # (``cudnn.deterministic = True``) is the place only while no seed was set
            self.latest = (user_location(), call_text(name, value))
            self.latest_seeds = fixed
        if self.asked_at is None and asks(name, value):
            self.asked_at = user_location()
            self.asked_by = call_text(name, value)
            fresh = watched_from_start()
            if not self.seeded["torch"] and _initial_seed() != self.torch_seed:
                self.seeded["torch"] = True  # seeded through the generator object
                self.observed.add("torch")
            for f in FAMILIES:
                if not fresh and f not in self.observed:
                    self.seeded[f] = True  # may have been seeded before the watcher started
                if not self.seeded[f]:
                    self.ref[f] = snapshot(f)
            for made in self.generators:  # draws before the ask may pick the run's seed
                made[2] = _state(made[0]) if made[0] is not None else None

    def _note_early_weights(self, name: str, value: Any) -> None:
        """At torch's first fixed seeding (none before, by any path, in a run watched from its
        start): keep the weights of a model already built that its initializers drew."""
        self.early_seen = True
        if ("torch" in self.observed or in_fork_rng() or not watched_from_start()
                or self.torch_seed is not None and _initial_seed() != self.torch_seed):
            return
        frame = user_frame(sys._getframe(2))
        early = weights_drawn_before(frame)
        if early is not None:
            self.early = (early, call_text(name, value), seeding_helper(frame))

    def on_step_pre(self, optimizer: Any) -> None:
        """The first step of an optimizer holding weights drawn before torch's first seed and
        unchanged since; reported when the seeding is the run's (a seeding helper, or numpy or
        random seeded too), not a fixed seed for one draw (a validation set)."""
        if self.early is None:
            return
        early, call, helper = self.early
        held = {id(p) for g in optimizer.param_groups for p in g["params"]}
        if not any(ref() is not None and id(ref()) in held for ref in early.params):
            return  # another optimizer's step (its model was built after the seed)
        self.early = None
        if not early.unchanged_in(held) or not (
                helper or self.seeded["numpy"] or self.seeded["random"]):
            return
        self.report(
            f"{early.model} was built before this run seeded torch ({call}, called here): its "
            f"initial weights were drawn from the unseeded generator and "
            f"{type(optimizer).__name__} trains from them, so runs differ even with the same "
            "seed",
            fix=f"seed before building the model: move {call} above the line that builds it",
            where=early.where)

    def on_library_import_pre(self, name: str) -> None:
        self.importing = {f: ref for f, ref in self.ref.items()
                          if ref is not None and f not in self.done and not self.seeded[f]
                          and snapshot(f) == ref}

    def on_library_import(self, name: str) -> None:
        """A library's import-time code ended: what it drew (``rich.style``'s
        ``count(getrandbits(24))``, a module-level ``np.random.rand``) is not the run's data order
        or weights, so the snapshot moves past it. Only when the run had not drawn from that
        generator before the import started: then a draw before it is kept as it was seen."""
        importing, self.importing = self.importing, {}
        for f, before in importing.items():
            if f in self.done or self.seeded[f] or self.ref.get(f) is not before:
                continue  # seeded, reseeded from the OS, or already reported meanwhile
            now = snapshot(f)
            if reseeded_unseen(f, before, now):
                self.seeded[f] = True
            else:
                self.ref[f] = now

    def on_step(self, optimizer: Any) -> None:
        step = self.state.step
        if step >= self.next_step:  # 1, 2, 4, 8, ... or the first checked step after one
            self.next_step = 1 << step.bit_length()
            self._check_all(f"by the end of optimizer step {step}")

    def on_loader_iter(self, loader: Any) -> None:
        self.passes += 1
        if self.passes & (self.passes - 1) == 0:  # passes 1, 2, 4, ... (some loops iter() per step)
            self._check_all("when a pass over a DataLoader started")

    def on_exit(self) -> None:
        self._check_all("at the end of the run")

    def _made(self, generator: Any) -> None:
        """Keep a generator the user's code made from the OS, to see later whether it is drawn
        from (at most ``_GENERATORS``, one per line)."""
        where = user_location(sys._getframe(1))
        bit = getattr(generator, "bit_generator", None)
        if (bit is None or len(self.generators) >= _GENERATORS
                or any(made[1] == where for made in self.generators)):
            return
        self.generators.append([bit, where, _state(bit)])

    def _check_generators(self, moment: str) -> None:
        """Report a generator made from the OS that the run drew from after asking to be
        reproducible, at the line that made it: the seed belongs there."""
        for made in [m for m in self.generators if m[2] is not None and _drawn_from(m)]:
            made[0] = made[2] = None  # reported once; the line stays known
            self.report(
                f"np.random.default_rng here, given no seed, makes a generator seeded from the "
                f"OS, and the "
                f"run drew from it (seen {moment}) although it asks to be reproducible "
                f"({self.asked_by} at line {self.asked_at[1]}): its draws (a data split, a "
                "shuffle) differ every run",
                fix="pass a seed derived from the run's seed: np.random.default_rng(seed)",
                where=made[1])

    def _resets_without_torch(self, family: Family, value: Any) -> bool:
        """This seeding puts numpy or random back to a seed they had before (a helper run before
        every fit), while torch, seeded once, has been drawn from since: torch is not reset.
        Reported only when one user function call resets both numpy and random (a seeding
        helper that leaves torch out; ourownstory/neural_prophet#147)."""
        return (isinstance(value, int) and self.values.get(family) == value
                and self.seeded["torch"] and self.torch_after_seed is not None
                and "torch" not in self.done and snapshot("torch") != self.torch_after_seed)

    def _check_reset(self, moment: str) -> None:
        """Report a reset of numpy/random that left torch as it was, once torch is drawn from
        after it (the second fit's weights and order come from where the first left torch)."""
        if self.reset is None or len(self.reset[3]) < 2 or snapshot("torch") == self.reset[2]:
            return  # (one generator reset alone: a fixed augmentation seed, not a run's reset)
        line, call, _, families = self.reset[:4]
        self.reset = None
        self.done.add("torch")
        self.report(
            f"{call} here, in a helper that puts {' and '.join(sorted(families))} back to the "
            f"run's seed, but it never seeds torch: torch's generator is left where earlier draws "
            f"put it, and the run drew from it afterwards "
            f"(seen {moment}): a repeated fit with the same seed gets other weights and batch "
            "order",
            fix=f"reset torch here too ({HOW['torch']}), or call trainguard.seed_everything(seed)",
            where=line)

    def _drawn(self, family: Family) -> bool:
        before = self.ref.get(family)
        if before is None:
            return False
        now = snapshot(family)
        if reseeded_unseen(family, before, now):
            self.seeded[family] = True
            return False
        return now != before

    def _check_all(self, moment: str) -> None:
        if self.asked_at is None or in_fork_rng():  # torch's state is restored when it ends
            return
        self._check_reset(moment)
        self._check_generators(moment)
        # every generator found at this moment goes into one finding: findings at one line merge,
        # and a second one's message would be lost in the count
        found = [f for f in FAMILIES
                 if f not in self.done and not self.seeded[f] and self._drawn(f)]
        if not found:
            return
        self.done.update(found)
        for f in [f for f in found if f in self.reseeded_at]:
            found.remove(f)
            line, call = self.reseeded_at[f]
            self.report(
                f"{call} here reseeds {DESCRIBE[f]} from the OS after this run asked to be "
                f"reproducible ({self.asked_by} at line {self.asked_at[1]}), and the run drew "
                f"from it afterwards (seen {moment}): those draws differ every run",
                fix=f"remove this call, or give it a seed derived from the run's seed "
                    f"({HOW[f]})",
                where=line)
        if not found:
            return
        seeded = [f for f in FAMILIES if self.seeded[f] and f in self.observed]
        what = f"seeds {', '.join(seeded)}" if seeded else "asks to be reproducible"
        at, by = self.latest if self.latest[0] is not None else (self.asked_at, self.asked_by)
        self.report(
            f"this run {what} ({by} here) but drew from "
            f"{' and from '.join(DESCRIBE[f] for f in found)} without seeding "
            f"{'it' if len(found) == 1 else 'them'} (seen {moment}): runs differ even with the "
            "same seed",
            fix=f"seed {' and '.join(found)} too ({', '.join(HOW[f] for f in found)}) next to this "
                "call, or call trainguard.seed_everything(seed)",
            where=at)
