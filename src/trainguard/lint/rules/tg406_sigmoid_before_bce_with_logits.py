"""TG406 sigmoid-before-bce-with-logits: probabilities fed to ``BCEWithLogitsLoss``.

``BCEWithLogitsLoss`` applies the sigmoid itself
(https://pytorch.org/docs/stable/generated/torch.nn.BCEWithLogitsLoss.html); a sigmoid before
it squeezes predictions into (0.5, 0.73) and gradients vanish. The sigmoid is followed through
names, shape ops, ``nn.Sigmoid`` modules, ``nn.Sequential`` heads, factories and the model
class's ``forward`` (:mod:`trainguard.lint.activations`), and reported at the sigmoid when it is
in the file;
``nn.BCELoss`` after a sigmoid is the right pairing and stays silent.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.activations import activation_of
from trainguard.lint.losses import loss_input, loss_kind
from trainguard.lint.rules import Edit, Hit
from trainguard.lint.script import Script

CODE = "TG406"


def check(script: Script) -> Iterator[Hit]:
    for call in script.calls:
        if loss_kind(script, call) != "BCEWithLogitsLoss":
            continue
        arg = loss_input(call)
        found = activation_of(script, arg) if arg is not None else None
        if found is None or found[0] != "sigmoid":
            continue
        act = found[1]
        edits = []
        written = script.call_qualname(act) in ("torch.sigmoid", "torch.nn.functional.sigmoid") \
            or isinstance(act, ast.Call) and isinstance(act.func, ast.Attribute) \
            and act.func.attr == "sigmoid"
        if act is arg and isinstance(act, ast.Call) and written:
            inner = act.args[0] if act.args else (
                act.func.value if isinstance(act.func, ast.Attribute) else None)
            text = script.segment(inner) if inner is not None else None
            if text:
                edits = [Edit(act.lineno, act.col_offset, act.end_lineno or act.lineno,
                              act.end_col_offset or 0, text)]
        yield Hit(act, f"this sigmoid's output is fed to BCEWithLogitsLoss at "
                       f"{script.at(call.lineno)}, which applies the sigmoid itself: the "
                       f"sigmoid is applied twice and gradients vanish",
                  edits=edits, safe=False)
