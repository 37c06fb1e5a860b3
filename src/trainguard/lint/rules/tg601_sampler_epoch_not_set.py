"""TG601 sampler-epoch-not-set: ``DistributedSampler`` without ``set_epoch(epoch)``.

The sampler seeds its shuffle with ``seed + epoch``; without ``set_epoch`` every epoch uses the
same order (https://pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler).
Silent for ``shuffle=False`` samplers (evaluation) and when any ``set_epoch`` call is in the file.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import is_false, kwarg
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script

CODE = "TG601"


def check(script: Script) -> Iterator[Hit]:
    if any(isinstance(c.func, ast.Attribute) and c.func.attr == "set_epoch"
           for c in script.calls):
        return
    for call in script.calls:
        if not (script.call_qualname(call) or "").endswith("DistributedSampler"):
            continue
        if is_false(kwarg(call, "shuffle")):
            continue
        yield Hit(call, "DistributedSampler shuffles with seed + epoch, but set_epoch() is never "
                        "called: every epoch sees the same order",
                  fix="call sampler.set_epoch(epoch) at the start of every epoch")
