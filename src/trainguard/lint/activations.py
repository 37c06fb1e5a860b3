"""What activation produced a value: ``softmax``, ``log_softmax`` or ``sigmoid``.

Followed through names, through ops that keep the values (``.view``, ``.reshape``,
``.flatten``, ``.squeeze``, ``.to``, indexing), through ``nn.Softmax()`` modules and names
bound to the function itself (``self.act = torch.sigmoid``, a ``partial`` or ``lambda`` of it),
the last layer of ``nn.Sequential`` heads (nested ones too), the ``forward`` of the model's
class, and what a
method or function the call graph resolves returns (``model.predict_proba(x)``), and
``self(x)`` in a method of the model (a base class's, through its subclasses' ``forward``). The model
behind a call is found however it was built: ``Net(...).to(device)``, a factory that returns
``nn.Sequential(..., nn.Softmax(1))``, or an attribute such as ``self.model`` whose class the
call graph knows (``Trainer(TwoTower())``). Softmax weights mixing one-hot label rows
(``probs @ F.one_hot(y).float()``) are probabilities again.
"""

from __future__ import annotations

import ast
from types import EllipsisType
from typing import Literal

from trainguard.lint.branches import EMPTY, UNSEEN, test_truth, feasible, last_elements
from trainguard.lint.callgraph import RETURNS_SELF, ClassRef, bind_arguments
from trainguard.lint.astutil import (COMPREHENSIONS, SCOPES, dotted, iterated_parts, parent,
                                     walk_local)
from trainguard.lint.dataflow import last_assignment, reaching_values, scope_of
from trainguard.lint.script import Script

__all__ = ["activation_of", "Activation", "helper_activations", "module_application"]

Activation = Literal["softmax", "log_softmax", "sigmoid"]
_FUNCS: dict[str, Activation] = {
    "torch.softmax": "softmax", "torch.nn.functional.softmax": "softmax",
    "torch.special.softmax": "softmax",
    "torch.log_softmax": "log_softmax", "torch.nn.functional.log_softmax": "log_softmax",
    "torch.sigmoid": "sigmoid", "torch.nn.functional.sigmoid": "sigmoid",
    "torch.special.expit": "sigmoid",
}
_METHODS: dict[str, Activation] = {"softmax": "softmax", "log_softmax": "log_softmax",
                                   "sigmoid": "sigmoid"}
_MODULES: dict[str, Activation] = {"torch.nn.Softmax": "softmax", "torch.nn.LogSoftmax":
                                   "log_softmax", "torch.nn.Sigmoid": "sigmoid"}
# Ops whose result holds the same values, rearranged or cast: an activation before them is
# still the activation of what they return.
_SAME_VALUES = {"view", "reshape", "flatten", "squeeze", "unsqueeze", "permute", "transpose",
                "contiguous", "float", "double", "half", "to", "cuda", "cpu", "clone", "t",
                "view_as", "reshape_as"}
_SAME_VALUES_FUNCS = {"torch.flatten", "torch.reshape", "torch.squeeze", "torch.unsqueeze",
                      "torch.transpose", "torch.permute"}


def activation_of(script: Script, expr: ast.AST | None, *, depth: int = 12,
                  origin: Script | None = None) -> tuple[Activation, ast.AST] | None:
    """The last activation applied to ``expr``'s value and the node that applied it, or None.
    ``origin`` is the linted file when ``script`` is another file of its project (a call there
    may bind the parameters that choose a layer)."""
    if expr is None or depth <= 0:
        return None
    origin = origin or script
    if isinstance(expr, ast.Name):
        bound = _binding(expr)
        source = _iterated_source(expr)
        if source is not None and (bound is None or getattr(bound[0], "lineno", 0) <
                                   source[1].lineno):  # for o in outputs: each element
            return _part_activation(script, source[0], ..., depth - 1, origin)
        if bound is None:  # a parameter: what every caller hands it
            return _parameter_activation(script, expr, depth - 1, origin)
        value, index = bound
        if index is not None:  # seg, exist = model(img): one part of what it returns
            return _part_activation(script, value, index, depth - 1, origin)
        values = _possible_values(script, expr, origin)
        if len(values) > 1:  # if apply_softmax: x = F.softmax(x): only when all agree
            return _one({activation_of(script, v, depth=depth - 1, origin=origin)
                         for v in values}, expr)
        return activation_of(script, value, depth=depth - 1, origin=origin)
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant) and \
            isinstance(expr.slice.value, str):  # out["exist"]: that entry of a returned dict
        return _part_activation(script, expr.value, expr.slice.value, depth - 1, origin)
    if isinstance(expr, ast.Subscript):  # probs[:, :k], out[0]
        return activation_of(script, expr.value, depth=depth - 1, origin=origin)
    mixed = _mixed(script, expr, depth, origin)
    if mixed is not None:
        return mixed
    if not isinstance(expr, ast.Call):
        return None
    q = script.call_qualname(expr) or ""
    if q in _FUNCS:
        return _FUNCS[q], expr
    if q in _SAME_VALUES_FUNCS and expr.args:
        return activation_of(script, expr.args[0], depth=depth - 1, origin=origin)
    f = expr.func
    # a method of a tensor, not a function of the torch module: the qualified name of a
    # method called on a call's result passes through that call (torch.sigmoid.().squeeze)
    method = not q.startswith("torch.") or "()" in q
    # (``self.softmax(h)`` calls a module the model holds, maybe an ``nn.LogSoftmax``: the
    # attribute's value decides, not its name)
    method = method and not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                             and f.value.id == "self")
    if isinstance(f, ast.Attribute) and f.attr in _METHODS and method:
        return _METHODS[f.attr], expr
    if isinstance(f, ast.Attribute) and f.attr in _SAME_VALUES and method:
        return activation_of(script, f.value, depth=depth - 1, origin=origin)
    if isinstance(f, ast.Call):  # nn.Softmax(dim=1)(x)
        found = _module_activation(script, f, depth - 1, origin)
        return (found[0], found[1] or expr) if found else None
    key = script.key(f)
    if key in ("self", "self.forward"):  # self(x) in a method of the model: its forward
        found = _own_forward(script, expr, depth - 1, origin)
        if found is not None:
            return found
    loop = _binding_loop(f) if isinstance(f, ast.Name) else None
    if loop is not None:  # for layer in self.layers: x = layer(x)
        return _one({_last_layer(script, loop.iter, depth - 1, origin)}, expr)
    if key and key != "self":
        values = _feasible_values(script, key, origin)
        # a bare activation module held in a local name (``sigmoid = nn.Sigmoid()`` in the
        # training function) is applied here, at this call (a model's ``self.act`` keeps the
        # line that builds it into the model)
        # (a reference to an activation function, ``sigmoid = torch.sigmoid``, applies
        # nothing where it is bound: this call applies it, wherever the name lives)
        kinds = {(found[0], expr) if found is not None and found[1] is v and (
                     _function_activation(script, v) is not None or
                     not key.startswith("self.") and (script.call_qualname(v) or "") in _MODULES)
                 else found
                 for v in values for found in [_module_activation(script, v, depth - 1, origin)]}
        if not kinds - {None}:  # a parameter or attribute: the classes the call graph knows
            kinds = {_class_activation(script, ref, depth - 1, origin)
                     for ref in script.graph.types(f)}
        if not kinds - {None} and isinstance(f, ast.Name):  # a parameter: the arguments
            kinds = {_module_activation(script, v, depth - 1, origin)
                     for v in _argument_values(script, f)} or kinds
        found = _one(kinds, expr)
        if found is not None:
            return found
    return _returned_activation(script, expr, depth - 1, origin)


def helper_activations(script: Script, acts: list[ast.AST]) -> list[tuple[ast.AST, bool] | None]:
    """For each node ``activation_of`` found for the input of a loss that applies the activation
    itself: the activation inside a helper function that only feeds such losses
    (:func:`_helper_activation`) and whether this is the first of ``acts`` to reach it (one
    finding per helper); None where there is none."""
    fed = {id(a) for a in acts}
    seen: set[int] = set()
    out: list[tuple[ast.AST, bool] | None] = []
    for act in acts:
        inner = _helper_activation(script, act, fed)
        out.append(None if inner is None else (inner, id(inner) not in seen))
        if inner is not None:
            seen.add(id(inner))
    return out


def _helper_activation(script: Script, call: ast.AST, fed: set[int]) -> ast.AST | None:
    """The activation inside a function of the file (not a method) that ``call`` runs and whose
    returns all end in it (``def forward_logits(b): return torch.sigmoid(model(b))``), when
    every call of that function in the file is in ``fed`` (ids of the calls whose output
    reaches a loss that applies the activation itself): the function exists to feed that loss,
    so its activation is the line to change. None otherwise (a model's ``predict_proba``, or a
    helper also used for probabilities, keeps its contract: the call feeding the loss is what to
    change)."""
    if not isinstance(call, ast.Call):
        return None
    targets = [t for t in script.targets(call)[:2] if not t.instance and t.script is script]
    if len(targets) != 1 or script.enclosing_class(targets[0].func) is not None:
        return None  # (a method: a model's ``predict_proba`` keeps its contract)
    sites = script.call_sites(targets[0].func)
    if not sites or any(id(site) not in fed for site in sites):
        return None
    rets = [n.value for n in ast.walk(targets[0].func) if isinstance(n, ast.Return) and
            n.value is not None]
    inner = {activation_of(script, r) for r in rets}
    found = inner.pop() if len(inner) == 1 else None
    return found[1] if found is not None and found[1] is not call else None


def _binding(name: ast.Name) -> tuple[ast.expr, int | None] | None:
    """The value last assigned to ``name`` above it in its scope, and the position of ``name``
    when it is one part of a tuple target (``seg_out, exist_out = model(img)``)."""
    plain = last_assignment(name.id, name)
    scope = scope_of(name)
    table = getattr(scope, "_tg_unpacks", None)
    if table is None:
        table = {}
        for sub in walk_local(scope):
            if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and \
                    isinstance(sub.targets[0], (ast.Tuple, ast.List)):
                elts = sub.targets[0].elts
                if any(isinstance(e, ast.Starred) for e in elts):
                    continue
                for i, e in enumerate(elts):
                    if isinstance(e, ast.Name):
                        table.setdefault(e.id, []).append((sub.lineno, sub.value, i))
        scope._tg_unpacks = table  # type: ignore[attr-defined]
    unpacks = [u for u in table.get(name.id, ()) if u[0] < name.lineno]
    if not unpacks:
        return (plain, None) if plain is not None else None
    line, value, index = max(unpacks, key=lambda u: u[0])
    if plain is not None and getattr(plain, "lineno", 0) > line:
        return plain, None
    return value, index


def _iterated_source(name: ast.Name) -> tuple[ast.expr, ast.AST] | None:
    """The iterable whose elements the nearest loop or comprehension around ``name`` binds it
    to, and that loop: ``outs`` for ``for o in outs``, ``for w, o in zip(weights, outs)``,
    ``sum(f(o) for i, o in enumerate(outs))``."""
    n = name
    while (n := parent(n)) is not None and not isinstance(n, SCOPES):
        gens = n.generators if isinstance(n, COMPREHENSIONS) else \
            [n] if isinstance(n, (ast.For, ast.AsyncFor)) and name not in ast.walk(n.iter) \
            else []
        for g in gens:
            for target, it in iterated_parts(g.target, g.iter):
                if any(isinstance(t, ast.Name) and t.id == name.id for t in ast.walk(target)):
                    return (it, n) if isinstance(target, ast.Name) else None
    return None


def _possible_values(script: Script, name: ast.Name, origin: Script) -> list[ast.expr]:
    """The values of ``name`` that may reach it: the last assignment, and the ones before it
    while that one sits under an ``if`` the program does not decide for it."""
    out = []
    for v in reaching_values(name.id, name):
        if not feasible(script, v, origin):
            continue
        out.append(v)
        if _decided_for(script, v, name, origin):
            break
    return out


def _decided_for(script: Script, node: ast.AST, use: ast.AST, origin: Script) -> bool:
    """Every ``if`` around ``node`` that does not also hold ``use`` is decided for it."""
    around = set()
    n = parent(use)
    while n is not None:
        around.add(id(n))
        n = parent(n)
    n = node
    while (p := parent(n)) is not None and id(p) not in around:
        if isinstance(p, ast.If) and n is not p.test:
            if test_truth(script, p.test, origin) is not (n in p.body):
                return False
        n = p
    return True


def _part_activation(script: Script, value: ast.expr, index: int | str | EllipsisType,
                     depth: int, origin: Script) -> tuple[Activation, ast.AST] | None:
    """The activation of part ``index`` of ``value`` (``...``: of each element, when all
    agree, as a loop over ``value`` sees them): an element of a tuple literal, or of the
    tuple every ``return`` of the function or ``forward`` it calls builds; for a string
    ``index``, that entry of a dict literal (``return {"seg": ..., "exist": self.head(f)}``).
    Either also of a parameter, from what its callers pass (a loss module's ``forward(self,
    out, ...)`` reading ``out["exist"]`` or unpacking ``main, side = out``)."""
    if depth <= 0:
        return None
    if isinstance(index, str):
        if isinstance(value, ast.Dict):
            entry = next((v for k, v in zip(value.keys, value.values)
                          if isinstance(k, ast.Constant) and k.value == index), None)
            return activation_of(script, entry, depth=depth - 1, origin=origin) \
                if entry is not None else None
    elif isinstance(value, (ast.Tuple, ast.List)) and index is ...:  # every element alike
        if not value.elts or any(isinstance(e, ast.Starred) for e in value.elts):
            return None
        return _one({activation_of(script, e, depth=depth - 1, origin=origin)
                     for e in value.elts}, value)
    elif isinstance(value, (ast.Tuple, ast.List)):
        if index < len(value.elts) and not any(isinstance(e, ast.Starred) for e in value.elts):
            return activation_of(script, value.elts[index], depth=depth - 1, origin=origin)
        return None
    if isinstance(value, ast.Name) and _binding(value) is None:
        # a parameter (``main, side = outputs`` in a loss module's ``forward``): that part of
        # what every caller passes
        passed = _passed_values(script, value)
        kinds = {_part_activation(script, v, index, depth - 1, origin)
                 for v in (passed or [])[:8]}
        return _one(kinds, value) if kinds else None
    if isinstance(value, ast.Name):  # out = self.head(x); return out
        bound = _binding(value)
        found = _part_activation(script, bound[0], index, depth - 1, origin) \
            if bound is not None and bound[1] is None else None
        if found is None and isinstance(index, str):  # out["exist"] = ...; out.update(head(x))
            found = _added_entry(script, value, index, depth - 1, origin)
        return found
    if not isinstance(value, ast.Call):
        return None
    kinds = set()
    targets = [*script.graph.instance_targets(value), *script.targets(value)][:2]
    for target in targets:  # return self.head(feat): the parts of what that returns
        kinds |= {_part_activation(target.script, r.value, index, depth - 1, origin)
                  for r in walk_local(target.func) if isinstance(r, ast.Return) and r.value}
    return _one(kinds, value) if kinds else None


def _added_entry(script: Script, name: ast.Name, key: str, depth: int,
                 origin: Script) -> tuple[Activation, ast.AST] | None:
    """Entry ``key`` of the dict ``name`` holds when it was added after the dict was built, in
    ``name``'s scope above it: ``out[key] = value``, or ``out.update(call)`` with ``call``
    returning a dict that has ``key`` (a model's ``forward`` merging a head's outputs)."""
    found = None
    for node in walk_local(scope_of(name)):
        if getattr(node, "lineno", 0) >= name.lineno:
            continue
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and
                t.value.id == name.id and isinstance(t.slice, ast.Constant) and
                t.slice.value == key for t in node.targets):
            found = activation_of(script, node.value, depth=depth - 1, origin=origin)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "update" and isinstance(node.func.value, ast.Name) and \
                node.func.value.id == name.id and len(node.args) == 1:
            found = _part_activation(script, node.args[0], key, depth - 1, origin) or found
    return found


def _parameter_activation(script: Script, name: ast.Name, depth: int,
                          origin: Script) -> tuple[Activation, ast.AST] | None:
    """A parameter of the function around ``name``: the activation of what every call of it in
    this file passes, also a module's ``forward`` run by calling the module (``criterion(seg,
    exist, ...)`` with a loss module whose ``forward`` feeds ``exist`` to a loss). Silent when
    a caller passes something else or nothing is known."""
    values = _passed_values(script, name) if depth > 0 else None
    if values is None:
        return None
    kinds = {activation_of(script, v, depth=depth - 1, origin=origin) for v in values[:8]}
    return _one(kinds, name) if kinds else None


def _passed_values(script: Script, name: ast.Name) -> list[ast.expr] | None:
    """What the calls of the function around ``name`` pass for that parameter, also a module's
    ``forward`` run by calling the module (``self.classify(sims, labels)``); None when ``name``
    is no parameter of the function around it."""
    func = script.enclosing_function(name)
    params = [a.arg for a in func.args.posonlyargs + func.args.args] if func is not None else []
    if name.id not in params:
        return None
    values = _argument_values(script, name)
    if func.name == "forward" and script.enclosing_class(func) is not None:  # type: ignore
        for call in script.graph.instance_sites(func):  # type: ignore[arg-type]
            bound = bind_arguments(params[1:], call)
            if name.id in bound:
                values.append(bound[name.id])
    return values


def _mixed(script: Script, expr: ast.AST, depth: int, origin: Script
           ) -> tuple[Activation, ast.AST] | None:
    """``probs @ one_hot`` (``torch.matmul``, ``torch.bmm``): softmax weights mixing one-hot
    label rows are class probabilities again (a matching network's attentional classifier).
    Returned with the product as its node: no final activation to remove, the loss is what
    to change."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.MatMult):
        left, right = expr.left, expr.right
    elif isinstance(expr, ast.Call) and len(expr.args) == 2 and \
            script.call_qualname(expr) in ("torch.matmul", "torch.bmm"):
        left, right = expr.args
    else:
        return None
    found = activation_of(script, left, depth=depth - 1, origin=origin)
    if found is None or found[0] != "softmax" or not _one_hot(script, right, depth - 1):
        return None
    return "softmax", expr


def _one_hot(script: Script, expr: ast.AST, depth: int) -> bool:
    """``F.one_hot(y, k)`` (cast or not), through names and the arguments every call passes."""
    if depth <= 0:
        return False
    if isinstance(expr, ast.Call):
        if script.call_qualname(expr) == "torch.nn.functional.one_hot":
            return True
        f = expr.func
        return isinstance(f, ast.Attribute) and \
            f.attr in _SAME_VALUES | {"expand", "expand_as", "repeat"} and \
            _one_hot(script, f.value, depth - 1)
    if isinstance(expr, ast.Name):
        bound = _binding(expr)
        if bound is not None:
            return bound[1] is None and _one_hot(script, bound[0], depth - 1)
        values = _passed_values(script, expr)
        return bool(values) and all(_one_hot(script, v, depth - 1) for v in values[:8])
    return False


def _returned_activation(script: Script, call: ast.Call, depth: int,
                         origin: Script) -> tuple[Activation, ast.AST] | None:
    """A call of a method or function the call graph resolves, other than a module's
    ``forward`` (``model.predict_proba(x)``, ``probabilities(model, x)``): the activation
    every ``return`` of it ends in, placed at the call: a method made to return
    probabilities is right where it is, the call that feeds them to a loss is what to
    change."""
    if depth <= 0:
        return None
    memo = script.__dict__.setdefault("_tg_returned_activation", {})
    if id(call) not in memo:
        memo[id(call)] = None  # a recursion through this call: unknown
        memo[id(call)] = _returned_activation_once(script, call, depth, origin)
    return memo[id(call)]


def _returned_activation_once(script: Script, call: ast.Call, depth: int,
                              origin: Script) -> tuple[Activation, ast.AST] | None:
    if not isinstance(call.func, (ast.Attribute, ast.Name)):
        return None
    for target in script.targets(call)[:2]:
        if target.instance:
            continue  # model(x): the class's forward, read above
        rets = [n.value for n in ast.walk(target.func) if isinstance(n, ast.Return) and
                n.value is not None]
        if not rets:
            continue
        kinds = {activation_of(target.script, r, depth=depth - 1, origin=origin) for r in rets}
        found = _one(kinds, call)
        if found is not None:
            return found[0], call
    return None


def _binding_loop(name: ast.Name) -> ast.For | None:
    """The ``for`` loop around ``name`` whose target is that name (``for layer in layers``)."""
    n = parent(name)
    while n is not None and not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                               ast.Module)):
        if isinstance(n, ast.For) and isinstance(n.target, ast.Name) and \
                n.target.id == name.id:
            return n
        n = parent(n)
    return None


def _last_layer(script: Script, container: ast.AST, depth: int, origin: Script) -> Found | None:
    """The activation of the last module a layer container holds: a list literal, a list built
    step by step (``layers.append(...)``), ``nn.ModuleList``/``nn.Sequential`` of either, or an
    attribute assigned one (``self.layers``)."""
    if depth <= 0:
        return None
    if isinstance(container, (ast.List, ast.Tuple)):
        if not container.elts or isinstance(container.elts[-1], ast.Starred):
            return None
        return _module_activation(script, container.elts[-1], depth - 1, origin)
    if isinstance(container, ast.Name):
        elements = last_elements(script, container, origin)
        if elements:
            kinds = {None if e is EMPTY or e is UNSEEN else
                     _module_activation(script, e, depth - 1, origin)
                     for e in elements}
            found = _one(kinds, container)
            return (found[0], None if found[1] is container else found[1]) if found else None
    key = script.key(container)
    if key and key != "self":
        values = _feasible_values(script, key, origin)
        kinds = {_module_activation(script, v, depth - 1, origin) for v in values}
        if values:
            found = _one(kinds, container)
            return (found[0], None if found[1] is container else found[1]) if found else None
    return None


def _feasible_values(script: Script, key: str, origin: Script) -> list[ast.expr]:
    """The values assigned to ``key`` in branches the program can take (``if probs: self.head
    = ...`` with ``probs`` fixed by every instantiation). A ``None`` placeholder (``self.model
    = None`` until ``fit`` builds it) is no module: code that applies or iterates ``key`` runs
    only once it holds another value."""
    values = [v for v in script.assignments.get(key, [])
              if not (isinstance(v, ast.Constant) and v.value is None)]
    if len(values) < 2:
        return values
    return [v for v in values if feasible(script, v, origin)]


Found = tuple[Activation, "ast.AST | None"]


def _argument_values(script: Script, name: ast.Name) -> list[ast.expr]:
    """What callers pass for parameter ``name`` of the function around it (``train(net)``)."""
    func = script.enclosing_function(name)
    if func is None:
        return []
    values = script.graph.parameter_values(func, name.id) or []
    # a None passed or defaulted is no layer: code that uses the parameter as one skips it then
    return [v for v in values if not (isinstance(v, ast.Constant) and v.value is None)]


def _one(kinds: set, at: ast.AST) -> tuple[Activation, ast.AST] | None:  # type: ignore[type-arg]
    """The activation when every way of building the module agrees on it, with the node that
    applies it (in this file), else the call ``at``."""
    if None in kinds or len({k[0] for k in kinds}) != 1:
        return None
    kind, node = sorted(kinds, key=lambda k: getattr(k[1], "lineno", 0))[0]
    return kind, node if node is not None else at


def _module_activation(script: Script, value: ast.AST | None, depth: int,
                       origin: Script | None = None) -> Found | None:
    """The activation a module ends in, from the expression that builds it, and the node in
    this file that applies it (None when that is in another file)."""
    if value is None or depth <= 0:
        return None
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
            value.func.attr in RETURNS_SELF:  # Net().to(device), head.cuda()
        value = value.func.value
    origin = origin or script
    applied = _function_activation(script, value)
    if applied is not None:  # ``act = torch.sigmoid``: the function, applied where it is called
        return applied, value
    if isinstance(value, ast.Name):
        values = _feasible_values(script, value.id, origin)
        kinds = {_module_activation(script, v, depth - 1, origin) for v in values}
        if not kinds - {None}:
            kinds = {_class_activation(script, ref, depth - 1, origin)
                     for ref in script.graph.types(value)}
        if not kinds - {None} and not values:  # a parameter: what the callers pass
            kinds = {_module_activation(script, v, depth - 1, origin)
                     for v in _argument_values(script, value)} or kinds
        found = _one(kinds, value)
        return (found[0], None if found[1] is value else found[1]) if found else None
    if isinstance(value, ast.IfExp):  # act if act is not None else nn.Identity()
        t = test_truth(script, value.test, origin)
        branches = [value.body] if t is True else [value.orelse] if t is False else \
            [value.body, value.orelse]
        found = _one({_module_activation(script, b, depth - 1, origin) for b in branches}, value)
        return (found[0], None if found[1] is value else found[1]) if found else None
    if not isinstance(value, ast.Call):
        return None
    q = script.call_qualname(value) or ""
    if q in _MODULES:
        return _MODULES[q], value
    if q == "torch.nn.ModuleList" and value.args:
        return _last_layer(script, value.args[0], depth - 1, origin)
    if q == "torch.nn.Sequential" and value.args:
        last = value.args[-1]
        if isinstance(last, ast.Starred):  # nn.Sequential(*layers): the list's last layer
            if not isinstance(last.value, ast.Name):
                return None
            elements = last_elements(script, last.value, origin)
            if not elements:
                return None
            kinds = {None if e is EMPTY or e is UNSEEN else
                     _module_activation(script, e, depth - 1, origin)
                     for e in elements}
            found = _one(kinds, value)
            return (found[0], None if found[1] is value else found[1]) if found else None
        return _module_activation(script, last, depth - 1, origin)
    refs = script.graph.types(value)
    if refs:
        kinds = {_class_activation(script, ref, depth - 1, origin) for ref in refs}
        found = _one(kinds, value)
        return (found[0], None if found[1] is value else found[1]) if found else None
    for target in script.targets(value)[:2]:  # a factory: what it returns
        rets = [n for n in ast.walk(target.func) if isinstance(n, ast.Return) and n.value]
        kinds = {_module_activation(target.script, r.value, depth - 1, origin) for r in rets}
        found = _one(kinds, value)
        if found is not None:
            foreign = target.script is not script or found[1] is value
            return found[0], None if foreign else found[1]
    return None


def _function_activation(script: Script, value: ast.AST) -> Activation | None:
    """The activation a callable value applies when called: the function itself
    (``torch.sigmoid``, ``F.softmax``), ``functools.partial`` of it (``partial(F.softmax,
    dim=1)``), or a lambda whose body applies it (``lambda t: torch.sigmoid(t)``)."""
    if isinstance(value, (ast.Name, ast.Attribute)):
        return _FUNCS.get(script.qualname(value) or "")
    if isinstance(value, ast.Call) and script.call_qualname(value) == "functools.partial" \
            and value.args:
        return _function_activation(script, value.args[0])
    if isinstance(value, ast.Lambda):
        found = activation_of(script, value.body, depth=2)
        return found[0] if found is not None and found[1] is value.body else None
    return None


def _own_forward(script: Script, call: ast.Call, depth: int,
                 origin: Script) -> tuple[Activation, ast.AST] | None:
    """``self(x)`` or ``self.forward(x)`` in a method of a model class: the activation its
    ``forward`` ends in; for a base class without one (``Task.training_step`` calls
    ``self(x)``), the ``forward`` every subclass of the file defines, when they agree."""
    cls = script.enclosing_class(call)
    if cls is None:
        return None
    graph = script.graph
    ref = ClassRef(script, cls)
    refs = [ref] if graph.method(ref, "forward") is not None else [
        ClassRef(script, c) for c in script.classes.values()
        if any(dotted(b) == cls.name for b in c.bases) and
        any(isinstance(b, ast.FunctionDef) and b.name == "forward" for b in c.body)]
    return _one({_class_activation(script, r, depth, origin) for r in refs}, call) \
        if refs else None


def _class_activation(script: Script, ref: object, depth: int,
                      origin: Script | None = None) -> Found | None:
    """The activation every ``return`` of the class's ``forward`` ends in, and where."""
    graph = ref.script.graph  # type: ignore[attr-defined]
    target = graph.method(ref, "forward")
    if target is None or depth <= 0:
        return None
    returns = [n for n in ast.walk(target.func) if isinstance(n, ast.Return)
               and n.value is not None]
    kinds = set()
    for r in returns:
        found = activation_of(target.script, r.value, depth=depth - 1, origin=origin)
        kinds.add(found if found else None)
    if None in kinds or len({k[0] for k in kinds}) != 1:
        return None
    kind, node = sorted(kinds, key=lambda k: getattr(k[1], "lineno", 0))[0]
    return kind, node if target.script is script else None


def module_application(script: Script, act: ast.AST, qualname: str) -> ast.Call | None:
    """For ``self.softmax = nn.Softmax(dim=1)`` (``act``, a call of ``qualname``) assigned in a
    method of a class: the one ``self.softmax(...)`` call in the class's ``forward``; None when
    ``act`` is no such assignment or ``forward`` applies the module other than once."""
    p = parent(act)
    if not (isinstance(act, ast.Call) and script.call_qualname(act) == qualname
            and isinstance(p, ast.Assign) and len(p.targets) == 1
            and isinstance(p.targets[0], ast.Attribute)
            and dotted(p.targets[0].value) == "self"):
        return None
    cls = script.enclosing_class(act)
    forward = next((b for b in cls.body if isinstance(b, ast.FunctionDef)
                    and b.name == "forward"), None) if cls is not None else None
    if forward is None:
        return None
    name = f"self.{p.targets[0].attr}"
    calls = [c for c in walk_local(forward) if isinstance(c, ast.Call) and dotted(c.func) == name]
    return calls[0] if len(calls) == 1 else None
