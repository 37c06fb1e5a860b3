"""TG102 train-in-eval-mode: optimizer steps run after ``model.eval()`` without ``model.train()``.

The classic shape: ``model.train()`` once before the epoch loop, ``model.eval()`` (often inside
a ``validate()`` helper) inside it; from the second epoch on, BatchNorm stops updating its
running statistics and Dropout stops regularizing. Freezing BatchNorm on purpose
(``model.train()`` then ``bn.eval()``) is not a model-level eval and stays silent.
Reported at the ``eval()`` that is left in effect when the loop itself calls it; when a helper
the loop calls runs it (a ``validate()``, a callback, in this file or another), at the loop's
call into that helper, after which ``train()`` belongs (the ``eval()`` is named in the
message).
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
        # the eval() itself when the loop calls it; else the loop's call into the helper that
        # runs it (a validation function, a callback), after which train() belongs
        where = last.via or last.site
        if id(where) in seen:
            continue
        seen.add(id(where))
        if last.via is not None:
            yield Hit(where,
                      f"this call runs {last.key}.eval() ({last.place(script)}) and leaves it in "
                      f"effect: no {last.key}.train() follows before the next iteration's "
                      f"optimizer step ({step.place(script)}) in {loop_label(script, loop)}",
                      fix=f"call {last.key}.train() right after this call (or at the start of "
                          f"every training epoch)")
            continue
        yield Hit(where,
                  f"{last.key}.eval() at {last.place(script)} is still in effect when the next "
                  f"iteration's optimizer step ({step.place(script)}) runs: no "
                  f"{last.key}.train() comes before it in {loop_label(script, loop)}",
                  fix=f"call {last.key}.train() again before the next optimizer step: right "
                      f"after this evaluation, or at the start of every training epoch")
