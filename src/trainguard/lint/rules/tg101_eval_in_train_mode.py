"""TG101 eval-in-train-mode: evaluation runs while the model is still in train mode.

Dropout keeps dropping and BatchNorm normalizes with batch statistics (and updates its running
statistics) unless ``model.eval()`` runs first; see
https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.eval.
Fires only when the file shows mode-dependent modules (Dropout, BatchNorm, zoo models), itself or
in the class or factory of another project file that builds the model (``trainguard.lint.project``),
and the mode before the evaluation is known to be train: a ``.train()`` call, a training loop, or
a freshly built model, with no ``.eval()`` in between.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import dotted
from trainguard.lint.events import events
from trainguard.lint.modes import mode_before
from trainguard.lint.regions import eval_regions
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script

CODE = "TG101"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    if not script.mode_dependent:
        return
    for region in eval_regions(script):
        body = region.node.body  # type: ignore[attr-defined]
        if any(e.kind in ("eval", "mode?") for e in events(script, body)):
            continue
        first = region.forwards[0]
        fwd = dotted(first.func) or "the model"
        if isinstance(region.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            trained = []
            for site in script.call_sites(region.node):
                mode, why = mode_before(script, site)
                if mode == "train":
                    trained.append((site, why))
            if not trained:
                continue
            if len(trained) == 1:
                site, why = trained[0]
                yield Hit(site, f"{region.label} runs {fwd}(...) in train mode ({why}); "
                                f"Dropout and BatchNorm act as in training",
                          fix=f"call model.eval() before {region.label}, and model.train() "
                              f"before training again")
                continue
            # Every caller leaves the model training: the evaluation function is the one place
            # where model.eval() fixes them all.
            lines = ", ".join(str(s.lineno) for s, _ in trained)
            yield Hit(first, f"{region.label} runs {fwd}(...) in train mode at each of its "
                             f"calls (lines {lines}; {trained[0][1]}); Dropout and BatchNorm "
                             f"act as in training",
                      fix=f"call model.eval() at the start of {region.label}, and "
                          f"model.train() before training again")
            continue
        mode, why = mode_before(script, first)
        if mode == "train":
            yield Hit(first, f"{region.label} runs {fwd}(...) in train mode ({why}); Dropout "
                             f"and BatchNorm act as in training",
                      fix="call model.eval() before this loop, and model.train() before "
                          "training again")
