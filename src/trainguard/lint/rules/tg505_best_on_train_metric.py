"""TG505 best-on-train-metric: the "best" model is chosen on a training metric.

The training loss keeps falling while the model overfits, so a checkpoint chosen on it is the
most overfit one, not the best. Fires on a comparison between a ``best*`` value and a value named
for training (``train_loss``, ``train_acc``) or returned by a ``train*()`` function, where the
comparison guards a save or an update of the best value. A dict entry keyed for training counts
too (``metrics["train_mIoU"]``, ``logs.get("train_loss")``). The metric is followed through a
plain assignment (``monitored = train_loss``, ``score = metrics["train_acc"]``, reported there) and through a parameter that
every call fills with a training metric (``self.save(epoch, train_loss)`` into
``def save(self, epoch, fitness)``, reported at the call).
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
        if not _selects(node):
            continue
        why = _train_metric(script, other)
        at: ast.AST = node
        if why is not None and isinstance(other, ast.Name):
            value = last_assignment(other.id, other)
            if isinstance(value, (ast.Name, ast.Attribute)) or _entry(value) is not None:
                at = parent(value) or node  # `monitored = train_loss`: the line to change
        if why is None:
            found = _train_argument(script, other)
            if found is None:
                continue
            at, why = found
        yield Hit(at, f"the best model is chosen on {why}: a training metric keeps improving "
                      f"while the model overfits",
                  fix="compare a validation metric (e.g. val_loss) against the best value")


def _train_argument(script: Script, node: ast.AST) -> tuple[ast.AST, str] | None:
    """A parameter (``def save(self, epoch, fitness)``) that every call of its function in the
    file fills with a training metric (``self.save(epoch, train_loss)``): the call is where
    to change it."""
    if not isinstance(node, ast.Name):
        return None
    func = script.enclosing_function(node)
    if func is None or node.id not in {a.arg for a in func.args.args}:
        return None
    from trainguard.lint.callgraph import bind_arguments

    names = [a.arg for a in func.args.args]
    if names and names[0] == "self":
        names = names[1:]
    found = []
    for site in script.call_sites(func)[:8]:
        arg = bind_arguments(names, site).get(node.id)
        why = _train_metric(script, arg) if arg is not None else None
        if why is None:
            return None
        found.append((site, why))
    if not found:
        return None
    site, why = found[0]
    return site, f"{why}, passed as `{node.id}` to {func.name}() at {script.at(site.lineno)}"


def _train_metric(script: Script, node: ast.AST, depth: int = 2) -> str | None:
    name = dotted(node) or ""
    last = name.rsplit(".", 1)[-1]
    if _TRAIN.search(last) and not _VAL.search(last):
        return f"`{name}`"
    entry = _entry(node)
    if entry is not None and _TRAIN.search(entry) and not _VAL.search(entry):
        return f"`{script.segment(node) or entry}`"  # metrics["train_mIoU"]
    if isinstance(node, ast.Name):
        value = last_assignment(node.id, node)
        if depth > 0 and (isinstance(value, (ast.Name, ast.Attribute)) or
                          _entry(value) is not None):  # = train_loss, = logs["train_acc"]
            inner = _train_metric(script, value, depth - 1)
            return f"`{name}` (= {inner.strip('`').split('`')[0]})" if inner else None
        if isinstance(value, ast.Call):
            fname = (dotted(value.func) or "").rsplit(".", 1)[-1]
            if _TRAIN.search(fname) and not _VAL.search(fname):
                return f"`{name}`, returned by {fname}()"
    return None


def _entry(node: ast.AST | None) -> str | None:
    """The string key of ``metrics["train_loss"]`` or ``logs.get("train_acc")``."""
    while isinstance(node, ast.Subscript) and not (  # history["train_loss"][-1]
            isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
        node = node.value
    key = node.slice if isinstance(node, ast.Subscript) else node.args[0] if isinstance(
        node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
        and node.args else None
    return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None


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
