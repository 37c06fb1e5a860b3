"""Which learning-rate scheduler a name holds and with what settings, when the program fixes
them: built directly (``StepLR(opt, step_size=8)``), from a config
(``getattr(torch.optim.lr_scheduler, cfg["name"])(opt, **cfg["kwargs"])``, also with the name
popped from a copy of the section: ``kw = dict(cfg); getattr(..., kw.pop("name"))(opt, **kw)``),
through a registry dict of scheduler classes
(``SCHEDULERS[cfg["scheduler"]](opt, **cfg["args"])``), or wrapped in an object whose
``__getattr__`` forwards to the scheduler it holds
(``LRPolicy(ReduceLROnPlateau(opt, patience=3))``), or returned by a factory of the file
(``def get_scheduler(opt, cfg): return getattr(...)(opt, **cfg["kwargs"])``), also as one
entry of the tuple it returns (``optimizer, scheduler = make_optimization(model)``). Settings
are read with :func:`trainguard.lint.consts.resolve` (constants, config literals, defaults);
anything the program does not fix is ``UNKNOWN``, and a check then stays silent.
"""

from __future__ import annotations

import ast
from typing import Any

from trainguard.lint.astutil import dotted, parent, walk_local
from trainguard.lint.callgraph import bind_arguments
from trainguard.lint.consts import (UNKNOWN, _single_value, const_eval, resolve,
                                   with_constants)
from trainguard.lint.script import Script

__all__ = ["schedule_settings", "schedule_span", "span_of"]

_MODULE = "torch.optim.lr_scheduler"
# Positional parameters after the optimizer
# (https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate).
_POSITIONAL = {"StepLR": ("step_size", "gamma"), "MultiStepLR": ("milestones", "gamma"),
               "ExponentialLR": ("gamma",),
               "ReduceLROnPlateau": ("mode", "factor", "patience", "threshold")}


def schedule_settings(script: Script, key: str, at: ast.AST | None = None, *,
                      _depth: int = 3, _seen: frozenset[str] = frozenset()
                      ) -> tuple[str | None, Any]:
    """(scheduler class name, {setting: value}) for what ``key`` is assigned, or
    ``(None, UNKNOWN)``; the settings are ``UNKNOWN`` when any of them is not fixed, or when
    assignments disagree. With ``at`` (the node that uses ``key``), a parameter of the function
    around it that is never assigned is the scheduler every call hands in
    (``train_model(model, opt, exp_lr_scheduler)``), when all calls agree (a ``None`` default
    is no scheduler and is passed over)."""
    values = _assigned(script, key, at)
    found = {_built(script, v, 3) for v in values} - {None}
    if not found and _depth > 0:  # handed in: to the function, or to ``__init__`` (``self.sched = sched``)
        handed = [(v.id, v) for v in values if isinstance(v, ast.Name)]
        if at is not None and not values:
            handed.append((key, at))
        got = {repr(r): r for r in (_handed_in(script, name, node, _depth - 1, _seen | {key})
                                    for name, node in handed) if r is not None}
        return got.popitem()[1] if len(got) == 1 else (None, UNKNOWN)
    if len(found) != 1:
        return None, UNKNOWN
    cls, call = found.pop()  # type: ignore[misc]
    return cls, _settings(script, cls, call)


def _assigned(script: Script, key: str, at: ast.AST | None) -> list[ast.expr]:
    """What ``key`` is assigned: only the function around ``at``'s own assignments when it
    makes any (a helper's local ``lr_scheduler``, not its caller's namesake)."""
    values = script.assignments.get(key, [])
    func = script.enclosing_function(at) if at is not None and "." not in key else None
    local = [v for v in values if script.enclosing_function(v) is func] if func else []
    return local or (_unpacked(script, key, func) if func else []) or values


def _unpacked(script: Script, key: str, func: ast.AST) -> list[ast.expr]:
    """``optimizer, scheduler = make_optimization(model)`` in ``func``: what each ``return``
    of the factory (a function or method of the file) gives at ``key``'s place in the tuple,
    read through the factory's own assignments (``return optimizer, scheduler``)."""
    out: list[ast.expr] = []
    for n in walk_local(func):
        if not (isinstance(n, ast.Assign) and len(n.targets) == 1 and
                isinstance(n.targets[0], (ast.Tuple, ast.List)) and
                isinstance(n.value, ast.Call)):
            continue
        elts = n.targets[0].elts
        at = [i for i, t in enumerate(elts) if isinstance(t, ast.Name) and t.id == key]
        if len(at) != 1 or any(isinstance(t, ast.Starred) for t in elts):
            continue
        for target in script.targets(n.value)[:2]:
            if target.script is not script:
                continue
            for ret in walk_local(target.func):
                if not (isinstance(ret, ast.Return) and
                        isinstance(ret.value, (ast.Tuple, ast.List)) and
                        len(ret.value.elts) == len(elts)):
                    continue
                got = ret.value.elts[at[0]]
                out += [v for v in script.assignments.get(got.id, [])
                        if script.enclosing_function(v) is target.func] \
                    if isinstance(got, ast.Name) else [got]
    return out


def span_of(script: Script, key: str, at: ast.AST) -> Any:
    """The span (:func:`schedule_span`) of the one schedule ``key`` is built as, where ``at``
    uses it; ``UNKNOWN`` when an assignment builds none or they disagree."""
    spans = set()
    for v in _assigned(script, key, at):
        built = _built(script, v, 3)
        if built is None:
            return UNKNOWN
        spans.add(schedule_span(script, built[0], built[1]))
    return spans.pop() if len(spans) == 1 else UNKNOWN


def _handed_in(script: Script, key: str, at: ast.AST, depth: int, seen: frozenset[str]
               ) -> tuple[str | None, Any] | None:
    """What every call hands in as parameter ``key`` of the function around ``at``; None when
    each call only passes back a key being resolved (``StepRunner(..., self.lr_scheduler)``
    inside the class whose ``self.lr_scheduler`` is asked about: the other assignment says)."""
    func = script.enclosing_function(at)
    bound = script.graph.parameter_values(func, key) if func is not None else None
    if bound is None:
        return None, UNKNOWN
    values = [v for v in bound if not (isinstance(v, ast.Constant) and v.value is None)]
    kept = [v for v in values if isinstance(v, ast.Call) or script.key(v) not in seen]
    if values and not kept:
        return None
    values = kept
    got = set()
    for value in values:
        if isinstance(value, ast.Call):
            built = _built(script, value, 3)
            got.add((built[0], repr(_settings(script, *built))) if built else (None, "?"))
        else:  # a name the caller holds
            cls, settings = schedule_settings(script, script.key(value) or "", _depth=depth,
                                              _seen=seen)
            got.add((cls, repr(settings)))
    if len(got) != 1 or None in next(iter(got)):
        return None, UNKNOWN
    if isinstance(values[0], ast.Call):
        built = _built(script, values[0], 3)
        return built[0], _settings(script, *built)  # type: ignore[index,misc]
    return schedule_settings(script, script.key(values[0]) or "", _depth=depth, _seen=seen)


def _built(script: Script, value: ast.AST, depth: int) -> tuple[str, ast.Call] | None:
    if not isinstance(value, ast.Call) or depth <= 0:
        return None
    q = script.call_qualname(value) or ""
    if q.startswith(_MODULE + "."):
        return q.rsplit(".", 1)[-1], value
    f = value.func
    if isinstance(f, ast.Name):  # cls = getattr(torch.optim.lr_scheduler, spec["name"]); cls(...)
        held = _single_value(f)
        f = held if isinstance(held, ast.Call) and dotted(held.func) == "getattr" else f
    if isinstance(f, ast.Call) and dotted(f.func) == "getattr" and len(f.args) == 2 and \
            script.qualname(f.args[0]) == _MODULE:
        name = resolve(script, f.args[1])
        if name is UNKNOWN:
            name = _popped(script, f.args[1])
        return (name, value) if isinstance(name, str) else None
    if isinstance(f, ast.Subscript):
        cls = _registry_entry(script, f)
        return (cls, value) if cls else None
    for target in script.targets(value)[:2]:  # a factory of the file: what it returns
        if target.script is script and not target.instance:
            rets = [n.value for n in ast.walk(target.func)
                    if isinstance(n, ast.Return) and n.value is not None]
            got = {_built(script, r, depth - 1) for r in rets}
            if len(got) == 1 and None not in got:
                return got.pop()
    wrapper = script.classes.get(dotted(f) or "")
    if wrapper is not None and any((script.qualname(b) or "").startswith(_MODULE + ".")
                                   for b in wrapper.bases):
        return wrapper.name, value  # a scheduler class of the file (a warm-up multi-step LR)
    if wrapper is not None and _forwards_attributes(wrapper):
        for a in [*value.args, *(k.value for k in value.keywords)]:
            inner = [a] if isinstance(a, ast.Call) else \
                script.assignments.get(script.key(a) or "", []) if isinstance(
                    a, (ast.Name, ast.Attribute)) else []
            for v in inner:
                got = _built(script, v, depth - 1)
                if got:
                    return got
    return None


def _registry_entry(script: Script, sub: ast.Subscript) -> str | None:
    """``REGISTRY[name]`` with ``REGISTRY`` a dict literal of scheduler classes and ``name``
    fixed by the program: the class chosen."""
    name = resolve(script, sub.slice)
    if not isinstance(name, str) or not isinstance(sub.value, ast.Name):
        return None
    for table in script.assignments.get(sub.value.id, []):
        if isinstance(table, ast.Dict):
            for k, v in zip(table.keys, table.values):
                if isinstance(k, ast.Constant) and k.value == name:
                    q = script.qualname(v) or ""
                    return q.rsplit(".", 1)[-1] if q.startswith(_MODULE + ".") else None
    return None


def _popped(script: Script, expr: ast.expr) -> Any:
    """``kw.pop("name")`` (or a name bound once to it), ``kw`` a copy of a fixed config
    (:func:`_copied_config`): the value of that entry; ``UNKNOWN`` otherwise."""
    if isinstance(expr, ast.Name):
        expr = _single_value(expr) or expr
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and
            expr.func.attr == "pop" and isinstance(expr.func.value, ast.Name) and
            len(expr.args) == 1 and isinstance(expr.args[0], ast.Constant)):
        return UNKNOWN
    copied = _copied_config(script, expr.func.value, expr)
    return copied[0].get(expr.args[0].value, UNKNOWN) if copied is not None else UNKNOWN


_COPIES = ("dict", "copy.copy", "copy.deepcopy")


def _copied_config(script: Script, name: ast.Name, use: ast.AST
                   ) -> tuple[dict, set[Any]] | None:
    """``kw = dict(cfg["sched"])`` (or ``cfg["sched"].copy()``, ``{**cfg["sched"]}``,
    ``copy.deepcopy(...)``, the config itself) assigned once in the function around ``use``,
    and changed only by ``kw.pop("name")`` with constant keys, all above ``use``: (the config
    as the program fixes it, the keys popped); None when it is bound or changed otherwise or
    the config is not fixed."""
    scope = script.enclosing_function(use) or script.tree
    values, popped = [], set()
    for n in walk_local(scope):
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name.id
                                             for t in n.targets):
            values.append(n.value)
        elif isinstance(n, ast.Name) and n.id == name.id and not isinstance(n.ctx, ast.Load):
            if not isinstance(parent(n), ast.Assign):
                return None  # a loop target, ``del``, an augmented assignment
        elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and \
                n.value.id == name.id and isinstance(parent(n), ast.Call):
            call = parent(n)
            if n.attr != "pop":
                if n.attr in ("update", "setdefault", "clear", "popitem", "__setitem__"):
                    return None
                continue
            if not (len(call.args) in (1, 2) and isinstance(call.args[0], ast.Constant) and
                    call.lineno <= use.lineno):  # type: ignore[attr-defined]
                return None
            popped.add(call.args[0].value)  # type: ignore[attr-defined]
        elif isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and \
                n.value.id == name.id and not isinstance(n.ctx, ast.Load):
            return None  # ``kw["gamma"] = 0.5``
    if len(values) != 1:
        return None
    source = values[0]
    if isinstance(source, ast.Call) and len(source.args) == 1 and not source.keywords and \
            (dotted(source.func) in _COPIES or script.call_qualname(source) in _COPIES):
        source = source.args[0]
    elif isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute) and \
            source.func.attr == "copy" and not source.args:
        source = source.func.value
    elif isinstance(source, ast.Dict) and len(source.keys) == 1 and source.keys[0] is None:
        source = source.values[0]
    config = _handed_config(script, source, scope)
    return (config, popped) if isinstance(config, dict) else None


def _handed_config(script: Script, source: ast.expr, scope: ast.AST) -> Any:
    """:func:`resolve`, and also an entry of a parameter of ``scope`` that every call of it
    hands a config the caller fixes (``cfg["lr_scheduler"]`` in ``get_scheduler(opt, cfg)``,
    called as ``get_scheduler(opt, tp["scheduler"])`` with ``tp`` a section of a literal
    config), read where the caller wrote it; ``UNKNOWN`` when the calls disagree."""
    value = resolve(script, source)
    if value is not UNKNOWN or not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return value
    params = [a.arg for a in [*scope.args.posonlyargs, *scope.args.args]]
    if params[:1] == ["self"]:
        params = params[1:]
    used = {n.id for n in ast.walk(source) if isinstance(n, ast.Name)} & \
        {*params, *(a.arg for a in scope.args.kwonlyargs)}
    if len(used) != 1:
        return UNKNOWN
    name = used.pop()
    given: dict[str, Any] = {}
    for site in script.call_sites(scope)[:8]:
        arg = bind_arguments(params, site).get(name)
        got = resolve(script, arg) if arg is not None else UNKNOWN
        if got is UNKNOWN:
            return UNKNOWN
        given[repr(got)] = got
    if len(given) != 1:
        return UNKNOWN
    return const_eval(with_constants(source, {name: given.popitem()[1]}))


def _forwards_attributes(cls: ast.ClassDef) -> bool:
    """``def __getattr__(self, name): return getattr(self.scheduler, name)``."""
    for f in cls.body:
        if isinstance(f, ast.FunctionDef) and f.name == "__getattr__":
            return any(isinstance(n, ast.Call) and dotted(n.func) == "getattr" and n.args and
                       (dotted(n.args[0]) or "").startswith("self.") for n in ast.walk(f))
    return False


def _settings(script: Script, cls: str, call: ast.Call) -> Any:
    out: dict[str, Any] = {}
    names = _POSITIONAL.get(cls, ())
    for i, a in enumerate(call.args[1:]):
        v = resolve(script, a)
        if v is UNKNOWN or isinstance(a, ast.Starred) or i >= len(names):
            return UNKNOWN
        out[names[i]] = v
    for k in call.keywords:
        v = resolve(script, k.value)
        copied = _copied_config(script, k.value, call) \
            if v is UNKNOWN and k.arg is None and isinstance(k.value, ast.Name) else None
        if copied is not None:  # ``**kw`` after ``kw.pop("name")``: the entries left
            v = {key: x for key, x in copied[0].items() if key not in copied[1]}
        if v is UNKNOWN:
            return UNKNOWN
        if k.arg is None:
            if not isinstance(v, dict):
                return UNKNOWN
            out.update(v)
        elif k.arg != "optimizer":
            out[k.arg] = v
    return out


# Schedules sized by a step count given to the constructor: (keyword, position after the
# optimizer, default) -- torch.optim.lr_scheduler's signatures
_SPANS = {"CosineAnnealingLR": ("T_max", 0, None), "LinearLR": ("total_iters", 2, 5),
          "PolynomialLR": ("total_iters", 0, 5), "ConstantLR": ("total_iters", 1, 5)}


def schedule_span(script: Script, cls: str | None, call: ast.Call, depth: int = 3) -> Any:
    """How many ``step()`` calls the schedule built by ``call`` takes to run its course: the
    ``T_max`` of a ``CosineAnnealingLR``, the ``total_iters`` of a ``LinearLR``; for a
    ``SequentialLR``, its last milestone plus the span of its last scheduler (its schedulers
    named in a list, each assigned once in the function). ``UNKNOWN`` otherwise."""
    if depth <= 0 or cls is None:
        return UNKNOWN
    if cls in _SPANS:
        name, pos, default = _SPANS[cls]
        node = next((k.value for k in call.keywords if k.arg == name), None)
        if node is None and len(call.args) > pos + 1:
            node = call.args[pos + 1]
        v = resolve(script, node) if node is not None else default
        return v if isinstance(v, int) and not isinstance(v, bool) else UNKNOWN
    if cls != "SequentialLR":
        return UNKNOWN
    parts = next((k.value for k in call.keywords if k.arg == "schedulers"),
                 call.args[1] if len(call.args) > 1 else None)
    stones = next((k.value for k in call.keywords if k.arg == "milestones"),
                  call.args[2] if len(call.args) > 2 else None)
    milestones = resolve(script, stones) if stones is not None else UNKNOWN
    if not isinstance(parts, (ast.List, ast.Tuple)) or not parts.elts or \
            not isinstance(milestones, list) or not milestones or \
            not all(isinstance(m, int) for m in milestones):
        return UNKNOWN
    last = parts.elts[-1]
    if isinstance(last, ast.Name):
        func = script.enclosing_function(call) or script.tree
        values = [n.value for n in walk_local(func) if isinstance(n, ast.Assign) and
                  any(isinstance(t, ast.Name) and t.id == last.id for t in n.targets)]
        last = values[0] if len(values) == 1 else None
    built = _built(script, last, 2) if last is not None else None
    span = schedule_span(script, built[0], built[1], depth - 1) if built else UNKNOWN
    return max(milestones) + span if isinstance(span, int) else UNKNOWN
