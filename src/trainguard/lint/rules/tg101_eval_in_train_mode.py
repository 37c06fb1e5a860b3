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
        fwd = dotted(region.forwards[0].func) or "the model"
        if isinstance(region.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for site in script.call_sites(region.node):
                mode, why = mode_before(script, site)
                if mode == "train":
                    yield Hit(site, f"{region.label} runs {fwd}(...) in train mode ({why}); "
                                    f"Dropout and BatchNorm act as in training",
                              fix=f"call model.eval() before {region.label}, and model.train() "
                                  f"before training again")
        else:
            mode, why = mode_before(script, region.node)
            if mode == "train":
                yield Hit(region.forwards[0],
                          f"evaluation loop runs {fwd}(...) in train mode ({why}); Dropout and "
                          f"BatchNorm act as in training",
                          fix="call model.eval() before this loop, and model.train() before "
                              "training again")
