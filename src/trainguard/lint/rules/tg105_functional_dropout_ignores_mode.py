"""TG105 functional-dropout-ignores-mode: ``F.dropout`` in ``forward`` without ``training=``.

``torch.nn.functional.dropout(input, p=0.5, training=True)`` defaults to ``training=True``
(https://pytorch.org/docs/stable/generated/torch.nn.functional.dropout.html), so it keeps
dropping after ``model.eval()``. Silent under ``if self.training:``, when ``training`` is given by
name (``training=True`` by name is a stated choice: Tacotron 2 keeps its pre-net dropout on at
inference), when it is passed by position as anything but the literal ``True``, and when ``p``
is the literal 0.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import const_value, is_true, kwarg, parent
from trainguard.lint.rules import Edit, Hit
from trainguard.lint.script import Script

CODE = "TG105"
_DROPOUTS = {f"torch.nn.functional.{n}" for n in (
    "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")}


def check(script: Script) -> Iterator[Hit]:
    for call in script.calls:
        q = script.call_qualname(call)
        if q not in _DROPOUTS:
            continue
        func = script.enclosing_function(call)
        if func is None or func.name != "forward" or not isinstance(parent(func), ast.ClassDef):
            continue
        if _guarded_by_training(call, func):
            continue
        training = kwarg(call, "training")
        if training is not None:
            continue  # stated by name (even True: Tacotron 2 keeps its pre-net dropout on)
        if len(call.args) >= 3:
            training = call.args[2]
        if training is not None and not is_true(training):
            continue
        p = kwarg(call, "p") or (call.args[1] if len(call.args) >= 2 else None)
        if const_value(p) in (0, 0.0):
            continue
        name = q.rsplit(".", 1)[-1]  # type: ignore[union-attr]
        if training is not None:
            edit = Edit(training.lineno, training.col_offset, training.end_lineno or 0,
                        training.end_col_offset or 0, "self.training")
        else:
            line = script.lines[(call.end_lineno or 1) - 1]
            end = (call.end_col_offset or 1) - 1
            before = line[:end].rstrip()
            sep = " " if before.endswith(",") else ", "
            edit = Edit(call.end_lineno or 1, end, call.end_lineno or 1, end,
                        f"{sep}training=self.training")
        given = "passes training=True" if training is not None else "has no training= argument"
        owner = parent(func).name  # type: ignore[union-attr]
        yield Hit(call, f"{name}(...) in {owner}.forward {given}, so dropout stays on after "
                        f"model.eval()",
                  fix="pass training=self.training, or use an nn.Dropout module",
                  edits=[edit], safe=False)


def _guarded_by_training(call: ast.AST, func: ast.AST) -> bool:
    """``if self.training: x = F.dropout(x, p)`` only runs in train mode."""
    n = call
    while (p := parent(n)) is not None and p is not func:
        if isinstance(p, (ast.If, ast.IfExp)) and n is not p.test and any(
                isinstance(s, ast.Attribute) and s.attr == "training" for s in ast.walk(p.test)):
            return n in getattr(p, "body", []) or n is getattr(p, "body", None)
        n = p
    return False
