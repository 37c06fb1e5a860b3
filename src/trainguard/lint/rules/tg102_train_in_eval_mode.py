"""TG102 train-in-eval-mode: optimizer steps run after ``model.eval()`` without ``model.train()``.

The classic shape: ``model.train()`` once before the epoch loop, ``model.eval()`` (often inside
a ``validate()`` helper) inside it; from the second epoch on, BatchNorm stops updating its
running statistics and Dropout stops regularizing. Freezing BatchNorm on purpose
(``model.train()`` then ``bn.eval()``) is not a model-level eval and stays silent.
Reported at the ``eval()`` that is left in effect, the cause (inside a helper of the file that
the loop calls: the call is named in the message); at the call when the helper is in another
file.
"""

from __future__ import annotations

from collections.abc import Iterator

from trainguard.lint.events import events
from trainguard.lint.regions import loop_label, training_loops
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script

CODE = "TG102"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    if not script.mode_dependent:
        return
    seen: set[int] = set()
    for loop in training_loops(script):
        evs = events(script, loop.body)  # type: ignore[attr-defined]
        first_step = next(i for i, e in enumerate(evs) if e.kind == "step")
        if any(e.kind in ("train", "mode?") for e in evs[:first_step]):
            continue
        modes = [e for e in evs if e.kind in ("train", "eval", "mode?")]
        if not modes or modes[-1].kind != "eval":
            continue
        last = modes[-1]
        step = evs[first_step]
        where = last.site  # the eval() itself, or the call into another file
        if id(where) in seen:
            continue
        seen.add(id(where))
        inside = f" (inside the call at {script.at(last.via.lineno)})" if last.via else ""
        yield Hit(where,
                  f"{last.key}.eval() at {last.place(script)}{inside} is still in effect when "
                  f"the next iteration's optimizer step ({step.place(script)}) runs: no "
                  f"{last.key}.train() comes before it in {loop_label(script, loop)}",
                  fix=f"call {last.key}.train() again before the next optimizer step: right "
                      f"after this evaluation, or at the start of every training epoch")
