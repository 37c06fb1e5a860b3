"""TG305 scheduler-before-optimizer: ``scheduler.step()`` before ``optimizer.step()``, or an
epoch scheduler stepped every batch.

Since PyTorch 1.1 ``lr_scheduler.step()`` must follow ``optimizer.step()``; called first, the
first value of the schedule is skipped
(https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate). A ``StepLR``,
``MultiStepLR`` or ``ExponentialLR`` with literal epoch counts stepped inside the batch loop of
an epoch loop runs its schedule once per batch. OneCycleLR, CyclicLR and warmup (Lambda)
schedulers are per batch by design and stay silent; so do schedules sized from the loader
(``step_size=len(loader) * 30``), and ``ReduceLROnPlateau``, which steps on a metric.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import const_value, walk_local
from trainguard.lint.events import events
from trainguard.lint.regions import training_loops
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script

CODE = "TG305"
SKIP_IN_TESTS = True  # about a training run; test files are not runs
_EPOCH_SCHEDULERS = {"StepLR", "MultiStepLR", "ExponentialLR"}


def check(script: Script) -> Iterator[Hit]:
    loops = training_loops(script)
    for loop in loops:
        evs = events(script, loop.body)  # type: ignore[attr-defined]
        first_step = next(i for i, e in enumerate(evs) if e.kind == "step")
        for e in evs[:first_step]:
            if e.kind == "sched" and script.schedulers.get(e.key or "") != "ReduceLROnPlateau":
                yield Hit(e.node,
                          f"{e.key}.step() runs before the first {evs[first_step].key}.step() "
                          f"(line {evs[first_step].node.lineno}): the schedule's first learning "
                          f"rate is skipped",
                          fix=f"call {e.key}.step() after optimizer.step()")
                break
    for loop in loops:
        if not any(isinstance(p, (ast.For, ast.While)) for p in script.enclosing_loops(loop)):
            continue
        for call in walk_local(loop):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and \
                    call.func.attr == "step" and _inner_most(script, call, loop):
                key = script.key(call.func.value)
                cls = script.schedulers.get(key or "")
                if cls in _EPOCH_SCHEDULERS and _literal_schedule(script, key or ""):
                    yield Hit(call, f"{key} is a {cls}, a per-epoch schedule, but it is stepped "
                                    f"inside the batch loop at line {loop.lineno}: it runs "
                                    f"once per batch",
                              fix=f"call {key}.step() once per epoch, after the batch loop")


def _inner_most(script: Script, call: ast.AST, loop: ast.AST) -> bool:
    loops = script.enclosing_loops(call)
    return bool(loops) and loops[0] is loop


def _literal_schedule(script: Script, key: str) -> bool:
    for value in script.assignments.get(key, []):
        if not isinstance(value, ast.Call):
            continue
        args = [*value.args[1:], *(k.value for k in value.keywords if k.arg != "optimizer")]
        for a in args:
            if isinstance(a, (ast.List, ast.Tuple)):
                if not all(const_value(x) is not ... for x in a.elts):
                    return False
            elif const_value(a) is ...:
                return False
        return True
    return False
