"""TG202 backward-twice: a module caches a tensor computed from its learnable parameters.

The cached tensor carries the graph of the call that built it; the first ``backward()`` frees
that graph's saved tensors, and the next step's backward through the cache raises "Trying to
backward through the graph a second time" (https://github.com/lucidrains/rotary-embedding-torch/issues/18).
Which stores count, and what stays silent: :mod:`trainguard.lint.caches`. Reported at the store.
"""

from __future__ import annotations

from collections.abc import Iterator

from trainguard.lint.caches import cached_graphs
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script

CODE = "TG202"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    if not script.may_reach("backward") or "self." not in script.source:
        return
    for c in cached_graphs(script):
        yield Hit(c.store, f"{c.cls.name} caches {c.cache}, computed with grad from "
                           f"self.{c.source}, and later calls reuse it: it still holds the graph "
                           f"of the step that built it, which that step's backward frees, so "
                           f"the next backward through it raises 'Trying to backward through "
                           f"the graph a second time'",
                  fix=f"recompute it on every call while {c.source} learns, cache it only "
                      f"under torch.no_grad() or when it needs no gradient, or detach it")
