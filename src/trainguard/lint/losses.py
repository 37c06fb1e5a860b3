"""Which loss a call computes: ``F.cross_entropy(...)`` or a criterion built as
``nn.CrossEntropyLoss()``, followed through names and attributes (``self.criterion``)."""

from __future__ import annotations

import ast

from trainguard.lint.script import Script

__all__ = ["loss_kind", "loss_input"]

_FUNCTIONAL = {"torch.nn.functional.cross_entropy": "CrossEntropyLoss",
               "torch.nn.functional.nll_loss": "NLLLoss",
               "torch.nn.functional.binary_cross_entropy_with_logits": "BCEWithLogitsLoss"}
_CLASSES = {"torch.nn.CrossEntropyLoss": "CrossEntropyLoss", "torch.nn.NLLLoss": "NLLLoss",
            "torch.nn.BCEWithLogitsLoss": "BCEWithLogitsLoss",
            "torch.nn.modules.loss.CrossEntropyLoss": "CrossEntropyLoss"}


def loss_kind(script: Script, call: ast.Call) -> str | None:
    q = script.call_qualname(call) or ""
    if q in _FUNCTIONAL:
        return _FUNCTIONAL[q]
    if isinstance(call.func, ast.Call):
        return _CLASSES.get(script.call_qualname(call.func) or "")
    key = script.key(call.func)
    kinds = {_CLASSES.get(script.call_qualname(v) or "") for v in script.assignments.get(key or "",
                                                                                          [])}
    return kinds.pop() if len(kinds) == 1 else None


def loss_input(call: ast.Call) -> ast.expr | None:
    if call.args:
        return call.args[0]
    for kw in call.keywords:
        if kw.arg == "input":
            return kw.value
    return None
