"""TG505 best-on-train-metric: the "best" model is chosen on a training metric.

The training loss keeps falling while the model overfits, so a checkpoint chosen on it is the
most overfit one, not the best. Fires on a comparison between a ``best*`` value and a value named
for training (``train_loss``, ``train_acc``) or returned by a ``train*()`` function, where the
comparison guards a save or an update of the best value.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from trainguard.lint.astutil import dotted, parent
from trainguard.lint.dataflow import last_assignment
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script

CODE = "TG505"
SKIP_IN_TESTS = True  # about a training run; test files are not runs
_TRAIN = re.compile(r"(^|_)(train|training|trn)(_|$)", re.I)
_VAL = re.compile(r"val|valid|test|eval|dev", re.I)


def check(script: Script) -> Iterator[Hit]:
    for node in script.nodes:
        if not isinstance(node, ast.Compare) or len(node.comparators) != 1:
            continue
        sides = [node.left, node.comparators[0]]
        names = [dotted(s) or "" for s in sides]
        best = [i for i, n in enumerate(names) if "best" in n.lower()]
        if len(best) != 1:
            continue
        other = sides[1 - best[0]]
        why = _train_metric(script, other)
        if why is None or not _selects(node):
            continue
        yield Hit(node, f"the best model is chosen on {why}: a training metric keeps improving "
                        f"while the model overfits",
                  fix="compare a validation metric (e.g. val_loss) against the best value")


def _train_metric(script: Script, node: ast.AST) -> str | None:
    name = dotted(node) or ""
    last = name.rsplit(".", 1)[-1]
    if _TRAIN.search(last) and not _VAL.search(last):
        return f"`{name}`"
    if isinstance(node, ast.Name):
        value = last_assignment(node.id, node)
        if isinstance(value, ast.Call):
            fname = (dotted(value.func) or "").rsplit(".", 1)[-1]
            if _TRAIN.search(fname) and not _VAL.search(fname):
                return f"`{name}`, returned by {fname}()"
    return None


def _selects(compare: ast.Compare) -> bool:
    """The comparison guards saving or updating the best, or is stored as ``is_best``."""
    p = parent(compare)
    while isinstance(p, (ast.BoolOp, ast.UnaryOp)):
        p = parent(p)
    if isinstance(p, ast.Assign):
        return any("best" in (dotted(t) or "").lower() for t in p.targets)
    if isinstance(p, ast.If):
        text = " ".join(ast.unparse(s) for s in p.body)
        return "best" in text.lower() or "save" in text.lower()
    return False
