"""Which loss a call computes: ``F.cross_entropy(...)`` or a criterion built as
``nn.CrossEntropyLoss()``, followed through names and attributes (``self.criterion``). The
criterion may be chosen by a config the program fixes: from a registry dict of loss classes
(``LOSSES[cfg["loss"]]()``) or by name (``getattr(nn, cfg["loss"])()``), the key read with
:func:`trainguard.lint.consts.resolve`; a key the program does not fix chooses nothing."""

from __future__ import annotations

import ast

from trainguard.lint.astutil import dotted
from trainguard.lint.branches import test_truth
from trainguard.lint.callgraph import self_assigned
from trainguard.lint.dataflow import reaching_values
from trainguard.lint.consts import resolve
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
    values = script.assignments.get(key or "", [])
    if isinstance(call.func, ast.Name):  # a local name: the values that reach this call
        values = reaching_values(call.func.id, call) or values
    kinds = {_CLASSES.get(q or "") for v in values for q in _held_losses(script, v)}
    return kinds.pop() if len(kinds) == 1 else None


def _held_losses(script: Script, value: ast.AST) -> list[str | None]:
    """The loss classes an assigned value instantiates (a functional loss stored as it is counts
    as its class); for a parameter stored as it comes (``self.loss_fn = loss_fn`` in
    ``__init__``), the ones every caller passes for it."""
    if not isinstance(value, ast.Name):
        q = script.qualname(value) if isinstance(value, ast.Attribute) else None
        if q in _FUNCTIONAL:  # self.loss_func = F.binary_cross_entropy_with_logits
            return [f"torch.nn.{_FUNCTIONAL[q]}"]
        return [_built_loss(script, value)]
    func = script.enclosing_function(value)
    arg = None if func is None else next(
        (a for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]
         if a.arg == value.id), None)
    if arg is None:
        return [None]
    memo = script.__dict__.setdefault("_tg_held_losses", {})
    k = (id(func), value.id)
    if k not in memo:
        found = []
        for v in script.graph._param_values(func, arg):
            passed = script.assignments.get(v.id, []) if isinstance(v, ast.Name) else [v]
            found += [_built_loss(script, w) for w in passed] or [None]
        memo[k] = found or [None]
    return memo[k]


def _built_loss(script: Script, value: ast.AST, depth: int = 2) -> str | None:
    """The qualified name of the loss class ``value`` instantiates: ``nn.BCEWithLogitsLoss()``,
    ``LOSSES[cfg["loss"]]()`` with ``LOSSES`` a dict literal of loss classes, or
    ``getattr(nn, cfg["loss"])()``, when the program fixes the key; or the one a function or
    method of the file returns (``handler.get_criterion()``)."""
    if isinstance(value, ast.IfExp) and depth > 0:  # loss if loss is not None else default
        t = test_truth(script, value.test, script)
        got = {_built_loss(script, b, depth - 1) for b in
               ([value.body] if t is True else [value.orelse] if t is False else
                [value.body, value.orelse])}
        return got.pop() if len(got) == 1 else None
    if isinstance(value, ast.Attribute) and depth > 0:  # self.head.default_loss
        held = {_built_loss(ref.script, v, depth - 1)
                for ref in script.graph.types(value.value)
                for v in self_assigned(ref.node, value.attr)}
        if len(held) == 1 and (found := held.pop()) in _CLASSES:
            return found
    q = script.call_qualname(value)
    if q in _CLASSES or not isinstance(value, ast.Call):
        return q
    wrapped = _wrapped_loss(script, value)
    if wrapped is not None:
        return wrapped
    for t in script.targets(value)[:2] if depth > 0 else ():
        if t.script is script and not t.instance:
            got = {_built_loss(script, r.value, depth - 1) for r in ast.walk(t.func)
                   if isinstance(r, ast.Return) and r.value is not None}
            if len(got) == 1 and (found := got.pop()) in _CLASSES:
                return found
    f = value.func
    if isinstance(f, ast.Call) and dotted(f.func) == "getattr" and len(f.args) == 2 and \
            script.qualname(f.args[0]) in ("torch.nn", "torch.nn.modules.loss"):
        name = resolve(script, f.args[1])
        return f"torch.nn.{name}" if isinstance(name, str) else None
    if isinstance(f, ast.Subscript) and isinstance(f.value, ast.Name):
        tables = script.assignments.get(f.value.id, [])
        if len(tables) != 1 or not isinstance(tables[0], ast.Dict):
            return None
        name = resolve(script, f.slice)
        entry = next((v for k, v in zip(tables[0].keys, tables[0].values)
                      if isinstance(k, ast.Constant) and k.value == name), None)
        return script.qualname(entry) if entry is not None and isinstance(name, str) else None
    return q


_SIZE_READS = ("shape", "size", "dim", "ndim", "numel", "device", "dtype", "sigmoid")
_SIGMOIDS = ("torch.sigmoid", "torch.nn.functional.sigmoid")


def _wrapped_loss(script: Script, value: ast.Call) -> str | None:
    """A loss module of the project (``WeightedFocalLoss(alpha=0.5)``) whose ``forward`` hands
    its input, unchanged, to one functional loss (``F.binary_cross_entropy_with_logits(inputs,
    targets, reduction="none")``) and reads it nowhere else but for its size or its own sigmoid
    (a focal loss's ``p = torch.sigmoid(inputs)``): what it is given must be what that loss
    takes, so it counts as that loss's class."""
    ref = script.graph.class_named(dotted(value.func) or "")
    if ref is None or not script.graph.is_module_class(ref):
        return None
    forward = script.graph.method(ref, "forward")
    params = [] if forward is None else \
        [a.arg for a in forward.func.args.posonlyargs + forward.func.args.args][1:]
    if not params:
        return None
    kinds = set()
    for n in ast.walk(forward.func):
        if not (isinstance(n, ast.Name) and n.id == params[0]):
            continue
        up = getattr(n, "_tg_parent", None)
        if isinstance(n.ctx, ast.Store) or isinstance(up, ast.Attribute) and \
                up.attr not in _SIZE_READS:
            return None  # rebound, or transformed before the loss
        q = forward.script.call_qualname(up) if isinstance(up, ast.Call) else None
        if isinstance(up, ast.Attribute) or q in _SIGMOIDS:
            continue  # its size, or its own sigmoid (``p = torch.sigmoid(inputs)``): logits
        if q not in _FUNCTIONAL or loss_input(up) is not n:  # type: ignore[arg-type]
            return None
        kinds.add(_FUNCTIONAL[q])
    return f"torch.nn.{kinds.pop()}" if len(kinds) == 1 else None


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
            kinds |= {_CLASSES.get(_built_loss(script, w) or "") for w in values} or {None}
        memo[k] = kinds.pop() if len(kinds) == 1 else None
    return memo[k]


def _criterion_names(script: Script) -> set[str]:
    """Last parts of the names a loss module is assigned to (``criterion``, ``self.loss_fn``),
    with the loss classes themselves: a call by any other name computes none of these losses."""
    found = script.__dict__.get("_tg_criterion_names")
    if found is None:
        found = {c.rsplit(".", 1)[-1] for c in _CLASSES}
        for k, values in script.assignments.items():
            if any(q in _CLASSES for v in values for q in _held_losses(script, v)):
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
