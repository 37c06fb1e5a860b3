"""TG601 sampler-epoch-not-set: ``DistributedSampler`` without ``set_epoch(epoch)``.

The sampler seeds its shuffle with ``seed + epoch``; without ``set_epoch`` every epoch uses the
same order (https://pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler).
Silent for ``shuffle=False`` samplers (evaluation), when any ``set_epoch`` call is in the file,
when the file has no training loop (the epochs run elsewhere) and when the sampler is handed to a
helper other than ``DataLoader``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import is_false, kwarg, parent
from trainguard.lint.regions import training_loops
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script

CODE = "TG601"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    if any(isinstance(c.func, ast.Attribute) and c.func.attr == "set_epoch"
           for c in script.calls):
        return
    if not training_loops(script):
        return  # the epochs run elsewhere, where set_epoch may be called
    for call in script.calls:
        if not (script.call_qualname(call) or "").endswith("DistributedSampler"):
            continue
        if is_false(kwarg(call, "shuffle")) or _handed_on(script, call):
            continue
        yield Hit(call, "DistributedSampler shuffles with seed + epoch, but set_epoch() is never "
                        "called: every epoch sees the same order",
                  fix="call sampler.set_epoch(epoch) at the start of every epoch")


def _handed_on(script: Script, sampler: ast.Call) -> bool:
    """The sampler is passed to a call other than DataLoader (a helper may call set_epoch)."""
    p = parent(sampler)
    if not isinstance(p, ast.Assign):
        return False
    names = {t.id for t in p.targets if isinstance(t, ast.Name)}
    for call in script.calls:
        if (script.call_qualname(call) or "").endswith("DataLoader"):
            continue
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            if isinstance(arg, ast.Name) and arg.id in names:
                return True
    return False
