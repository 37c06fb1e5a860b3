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
    f = call.func
    last = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    if last is not None and last not in _criterion_names(script) and \
            last not in ("cross_entropy", "nll_loss", "binary_cross_entropy_with_logits"):
        # neither a loss function nor a name a loss module is bound to, unless a parameter
        # that the callers fill with one (``def validate(model, loader, criterion)``)
        return _passed_loss(script, call)
    q = script.call_qualname(call) or ""
    if q in _FUNCTIONAL:
        return _FUNCTIONAL[q]
    if isinstance(call.func, ast.Call):
        return _CLASSES.get(script.call_qualname(call.func) or "")
    key = script.key(call.func)
    kinds = {_CLASSES.get(script.call_qualname(v) or "") for v in script.assignments.get(key or "",
                                                                                          [])}
    return kinds.pop() if len(kinds) == 1 else None


def _passed_loss(script: Script, call: ast.Call) -> str | None:
    """The loss a parameter called as a function holds: what every call of the function in
    the file passes for it (a loss module built there, or a name bound to one)."""
    f = call.func
    if not isinstance(f, ast.Name) or len(call.args) < 2:
        return None  # a loss takes an input and a target
    func = script.enclosing_function(call)
    if func is None:
        return None
    arg = next((a for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]
                if a.arg == f.id), None)
    if arg is None:
        return None
    memo = script.__dict__.setdefault("_tg_passed_loss", {})
    k = (id(func), f.id)
    if k not in memo:
        kinds = set()
        for v in script.graph._param_values(func, arg):
            values = script.assignments.get(v.id, []) if isinstance(v, ast.Name) else [v]
            kinds |= {_CLASSES.get(script.call_qualname(w) or "") for w in values} or {None}
        memo[k] = kinds.pop() if len(kinds) == 1 else None
    return memo[k]


def _criterion_names(script: Script) -> set[str]:
    """Last parts of the names a loss module is assigned to (``criterion``, ``self.loss_fn``),
    with the loss classes themselves: a call by any other name computes none of these losses."""
    found = script.__dict__.get("_tg_criterion_names")
    if found is None:
        found = {c.rsplit(".", 1)[-1] for c in _CLASSES}
        for k, values in script.assignments.items():
            if any(script.call_qualname(v) in _CLASSES for v in values):
                found.add(k.rsplit(".", 1)[-1])
        script.__dict__["_tg_criterion_names"] = found
    return found


def loss_input(call: ast.Call) -> ast.expr | None:
    if call.args:
        return call.args[0]
    for kw in call.keywords:
        if kw.arg == "input":
            return kw.value
    return None
