"""TG404 batchnorm-batch-of-one: a training batch gives BatchNorm one value per channel.

``BatchNorm1d`` on an ``(N, C)`` batch with ``N == 1`` raises "Expected more than 1 value per
channel when training" (https://github.com/pytorch/pytorch/issues/4534). Statically: the file
uses ``BatchNorm1d`` and a ``DataLoader`` with the literal ``batch_size=1`` feeds a loop that runs
backward. ``BatchNorm2d`` on ``(1, C, H, W)`` has H*W values per channel and trains, so it alone
stays silent.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import const_value, kwarg, parent, walk_local
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script

CODE = "TG404"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    if "BatchNorm1d" not in script.source:
        return
    for call in script.calls:
        if not (script.call_qualname(call) or "").endswith("DataLoader"):
            continue
        size = kwarg(call, "batch_size")
        if size is None and len(call.args) >= 2:
            size = call.args[1]
        if const_value(size) != 1 or not _feeds_training(script, call):
            continue
        yield Hit(size or call, "batch_size=1 gives BatchNorm1d one value per channel in every "
                                "training batch: batch statistics are undefined and PyTorch "
                                "raises 'Expected more than 1 value per channel when training'",
                  fix="use a batch size above 1 (with drop_last=True), or GroupNorm/LayerNorm")


def _feeds_training(script: Script, loader: ast.Call) -> bool:
    p = parent(loader)
    names = set()
    if isinstance(p, ast.Assign):
        names = {t.id for t in p.targets if isinstance(t, ast.Name)}
    for node in script.nodes:
        if isinstance(node, (ast.For, ast.AsyncFor)):
            it = {n.id for n in ast.walk(node.iter) if isinstance(n, ast.Name)}
            if (names & it or node.iter is loader) and any(
                    isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                    and c.func.attr == "backward" for c in walk_local(node)):
                return True
    return False
