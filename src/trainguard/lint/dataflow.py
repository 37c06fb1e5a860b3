"""Light data flow inside one function: which names hold tensors that carry an autograd graph,
where a name was last assigned, and whether a value is only ever used as a plain number."""

from __future__ import annotations

import ast
import re

from trainguard.lint.astutil import (COMPREHENSIONS, SCOPES, comprehension_holds, dotted, is_true,
                                     kwarg, parent, walk_local)
from trainguard.lint.script import Script, is_backward

__all__ = ["scope_of", "last_assignment", "graph_names", "is_loss_call", "carries_graph",
           "numeric_only", "returns_graph", "CUTS"]

_LOSS_FN = re.compile(r"(loss|criterion|crit)\w*$|^(cross_entropy|nll_loss|mse_loss|l1_loss|"
                      r"binary_cross_entropy\w*|smooth_l1_loss|kl_div|huber_loss|ctc_loss)$",
                      re.I)
CUTS = {"item", "detach", "tolist", "numpy", "data", "cpu_numpy"}
# what a tensor tells about itself without holding its graph
_METADATA = {"requires_grad", "is_leaf", "shape", "dtype", "device", "ndim", "is_cuda"}
# Tensor methods and torch functions whose result keeps the input's grad_fn chain (argmax,
# comparisons, sizes and the like do not, and are not listed).
_DIFFERENTIABLE = {"sum", "mean", "squeeze", "unsqueeze", "view", "reshape", "float", "double",
                   "clone", "to", "abs", "pow", "exp", "log", "sqrt", "flatten", "norm",
                   "softmax", "log_softmax", "sigmoid", "tanh", "relu", "clamp", "mul", "add",
                   "sub", "div", "matmul", "prod", "var", "std", "logsumexp", "square",
                   "transpose", "permute", "contiguous", "neg", "exp_", "cpu", "cuda"}
_DIFFERENTIABLE_FUNCS = {"softplus", "sigmoid", "tanh", "relu", "exp", "log", "abs", "sum",
                         "mean", "stack", "cat", "softmax", "log_softmax", "logsigmoid",
                         "square", "sqrt", "pow", "norm", "matmul", "mul", "add", "clamp",
                         "logsumexp", "elu", "gelu", "silu", "leaky_relu"}
_NUMERIC_CALLS = {"print", "float", "int", "round", "str", "format", "len", "abs", "info", "debug",
                  "warning", "log", "add_scalar", "add_scalars", "write", "set_postfix",
                  "set_description", "update", "append", "isfinite", "isnan", "isclose"}


def scope_of(node: ast.AST) -> ast.AST:
    n = parent(node)
    while n is not None and not isinstance(n, (*SCOPES, ast.Module)):
        n = parent(n)
    return n if n is not None else node


def last_assignment(name: str, before: ast.AST) -> ast.expr | None:
    """The value last assigned to ``name`` (a plain name, or one name of a parallel assignment
    ``a, b = x.detach(), y.detach()``) in ``before``'s scope, above it."""
    line = before.lineno  # type: ignore[attr-defined]
    best: tuple[int, ast.expr, ast.Assign] | None = None
    for lineno, value, stmt in _assign_table(scope_of(before)).get(name, ()):
        if lineno < line and (best is None or lineno > best[0]):
            best = (lineno, value, stmt)
    return best[1] if best else None


def reaching_values(name: str, before: ast.AST) -> list[ast.expr]:
    """The values of ``name`` that may reach ``before``: the last assignment above it, and
    while that one sits under an ``if`` that does not hold ``before`` (``if not
    update_encoder: obs = obs.detach()``), the ones above it too."""
    line = before.lineno  # type: ignore[attr-defined]
    found = sorted(((ln, v, st) for ln, v, st in _assign_table(scope_of(before)).get(name, ())
                    if ln < line), key=lambda x: -x[0])
    out = []
    for _, value, stmt in found:
        out.append(value)
        if not _conditional_for(stmt, before):
            break
    return out


def _conditional_for(stmt: ast.AST, before: ast.AST) -> bool:
    """``stmt`` is under an ``if`` (of its scope) that does not also hold ``before``."""
    held = set()
    n = parent(before)
    while n is not None and not isinstance(n, SCOPES):
        held.add(id(n))
        n = parent(n)
    n = parent(stmt)
    while n is not None and not isinstance(n, SCOPES):
        if isinstance(n, ast.If) and id(n) not in held:
            return True
        n = parent(n)
    return False


def _assign_table(scope: ast.AST) -> dict[str, list[tuple[int, ast.expr, ast.Assign]]]:
    table = getattr(scope, "_tg_assigns", None)
    if table is None:
        table = {}
        for sub in walk_local(scope):
            if isinstance(sub, ast.Assign):
                for t in sub.targets:
                    if isinstance(t, ast.Name):
                        table.setdefault(t.id, []).append((sub.lineno, sub.value, sub))
                    elif isinstance(t, (ast.Tuple, ast.List)) and \
                            isinstance(sub.value, (ast.Tuple, ast.List)) and \
                            len(t.elts) == len(sub.value.elts) and \
                            not any(isinstance(e, ast.Starred) for e in t.elts):
                        for e, v in zip(t.elts, sub.value.elts):
                            if isinstance(e, ast.Name):
                                table.setdefault(e.id, []).append((sub.lineno, v, sub))
        scope._tg_assigns = table  # type: ignore[attr-defined]
    return table


def stored_items(name: str, value: ast.AST) -> list[ast.expr]:
    """For a container built empty (``log_probs = []``): what is later appended, inserted or
    added into it in the same function (``log_probs.append(dist.log_prob(a))``)."""
    if not (isinstance(value, (ast.List, ast.Tuple)) and not value.elts):
        return []
    scope = value
    while (p := parent(scope)) is not None and not isinstance(
            p, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
        scope = p
    if p is None:
        return []
    table = getattr(p, "_tg_stored", None)
    if table is None:
        table = {}
        for c in walk_local(p):
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and \
                    c.func.attr in ("append", "insert", "extend") and \
                    isinstance(c.func.value, ast.Name) and c.args:
                table.setdefault(c.func.value.id, []).append(c.args[-1])
        p._tg_stored = table  # type: ignore[attr-defined]
    return table.get(name, [])[:8]


def tuple_assignments(scope: ast.AST) -> dict[str, list]:
    """name -> [(line, tuple target, value)] for the tuple assignments of a scope (``a, b =
    f(x)``), read once per scope."""
    table = getattr(scope, "_tg_tuple_assigns", None)
    if table is None:
        table = {}
        for sub in walk_local(scope):
            if isinstance(sub, ast.Assign):
                for t in sub.targets:
                    if isinstance(t, (ast.Tuple, ast.List)):
                        for e in t.elts:
                            if isinstance(e, ast.Name):
                                table.setdefault(e.id, []).append((sub.lineno, t, sub.value))
        scope._tg_tuple_assigns = table  # type: ignore[attr-defined]
    return table


def is_loss_call(script: Script, node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    name = dotted(node.func) or ""
    return bool(_LOSS_FN.search(name.rsplit(".", 1)[-1]))


def _is_cut(expr: ast.AST) -> bool:
    for sub in ast.walk(expr):
        if isinstance(sub, ast.Attribute) and sub.attr in CUTS:
            return True
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and \
                sub.func.id in ("float", "int", "round"):
            return True
    return False


def graph_names(script: Script, loop: ast.AST, *, seed: set[str] | None = None) -> set[str]:
    """Names assigned in ``loop`` (grad enabled) that hold a tensor with a ``grad_fn``: model
    outputs, losses, names that ``backward()`` is called on, and arithmetic on those; ``seed``
    are names known to hold one already (a function's parameters its callers hand a loss)."""
    memo = script.__dict__.setdefault("_tg_graph_names", {})
    key = (id(loop), frozenset(seed or ()))
    if key not in memo:
        memo[key] = (loop, _graph_names(script, loop, seed))
    return set(memo[key][1])


def _graph_names(script: Script, loop: ast.AST, seed: set[str] | None) -> set[str]:
    names: set[str] = set(seed or ())
    for call in walk_local(loop):
        if is_backward(call):
            recv = call.func.value  # type: ignore[attr-defined]
            if isinstance(recv, ast.Call) and dotted(recv.func) and \
                    dotted(recv.func).endswith("scale") and recv.args:  # type: ignore[union-attr]
                recv = recv.args[0]
            while isinstance(recv, (ast.Subscript, ast.Attribute)) and \
                    not isinstance(recv.value, ast.Call) and _self_attr(recv) is None:
                recv = recv.value  # out["loss"].backward(): ``out`` holds the graph too
            if _self_attr(recv) is not None:  # self.loss.backward(): an attribute holds it
                names.add(_self_attr(recv))  # type: ignore[arg-type]
            elif isinstance(recv, ast.Name) and recv.id != "self":
                names.add(recv.id)
            elif isinstance(call.func.value, ast.Name) is False and call.args and \
                    isinstance(call.args[0], ast.Name):  # accelerator.backward(loss)
                names.add(call.args[0].id)
    assigns = [n for n in walk_local(loop) if isinstance(n, (ast.Assign, ast.For))
               and n is not loop or _dict_update(n) is not None]
    assigns.sort(key=lambda n: n.lineno)
    for _ in range(2):
        for a in assigns:
            if script.grad_disabled(a):
                continue
            if isinstance(a, ast.For):  # for k, v in losses.items(): v holds a graph
                names.update(_items_of_graph(script, a, names))
                continue
            update = _dict_update(a)
            if update is not None:  # state.update(loss=loss): the dict now holds the graph
                holder, values = update
                if any(carries_graph(script, v, names) for v in values):
                    names.add(holder)
                continue
            if carries_graph(script, a.value, names):
                for t in a.targets:
                    if isinstance(t, ast.Name):
                        names.add(t.id)
                    elif _self_attr(t) is not None:  # self.loss = ce + kl: held on the object
                        names.add(_self_attr(t))  # type: ignore[arg-type]
                    elif isinstance(t, ast.Tuple):  # logits, loss = model(x, y)
                        parts = _returned_parts(script, a.value, len(t.elts))
                        names.update(e.id for i, e in enumerate(t.elts)
                                     if isinstance(e, ast.Name) and (parts is None or parts[i]))
    return names


def _dict_update(node: ast.AST) -> tuple[str, list[ast.expr]] | None:
    """``state.update(loss=loss, mse=mse)`` or ``state.update({"loss": loss})`` as a statement:
    the dict's name and the values it takes."""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return None
    call = node.value
    f = call.func
    if not (isinstance(f, ast.Attribute) and f.attr == "update" and isinstance(f.value, ast.Name)):
        return None
    values = [k.value for k in call.keywords]
    for arg in call.args:  # (a mapping by name merges its values: ``logs.update(losses)``)
        values.extend(arg.values if isinstance(arg, ast.Dict) else
                      [arg] if isinstance(arg, ast.Name) and len(call.args) == 1 else [])
    return (f.value.id, values) if values else None


def _self_attr(node: ast.AST) -> str | None:
    """``self.loss`` (not ``self.loss.grad`` nor ``self``): an attribute of the object, which
    graph_names tracks like a name."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
            node.value.id == "self":
        return f"self.{node.attr}"
    return None


def _items_of_graph(script: Script, loop: ast.For, names: set[str]) -> set[str]:
    """The loop variables that take the values of a container holding graph tensors:
    ``for k, v in losses.items()``, ``for v in losses.values()``, ``for term in terms``
    (a list or tuple built from losses); keys are not values."""
    it, target = loop.iter, loop.target
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and not it.args and \
            it.func.attr in ("items", "values") and carries_graph(script, it.func.value, names):
        if it.func.attr == "values" and isinstance(target, ast.Name):
            return {target.id}
        if it.func.attr == "items" and isinstance(target, ast.Tuple) and \
                len(target.elts) == 2 and isinstance(target.elts[1], ast.Name):
            return {target.elts[1].id}
        return set()
    return _iterated(script, it, target, loop, names)


def _iterated(script: Script, it: ast.AST, target: ast.AST, loop: ast.For, names: set[str]
              ) -> set[str]:
    """Names of ``target`` that take graph values from iterating ``it``: a list of losses, a
    model's list of outputs (``for out, feats in disc(fake)``: a multi-scale discriminator),
    each part of ``zip(...)`` and the values of ``enumerate(...)``."""
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and not it.keywords:
        if it.func.id == "zip" and isinstance(target, ast.Tuple) and \
                len(target.elts) == len(it.args):
            return {n for part, arg in zip(target.elts, it.args)
                    for n in _iterated(script, arg, part, loop, names)}
        if it.func.id == "enumerate" and it.args and isinstance(target, ast.Tuple) and \
                len(target.elts) == 2:
            return _iterated(script, it.args[0], target.elts[1], loop, names)
    if isinstance(it, ast.Name):
        carried = it.id in names and _holds_sequence(it, loop)
    elif isinstance(it, (ast.List, ast.Tuple)):
        carried = any(carries_graph(script, e, names) for e in it.elts)
    else:
        carried = isinstance(it, ast.Call) and carries_graph(script, it, names)
    if not carried:
        return set()
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _holds_sequence(name: ast.Name, before: ast.AST) -> bool:
    """``name`` was last assigned a list or tuple literal (iterating a tensor gives rows)."""
    value = last_assignment(name.id, before)
    return isinstance(value, (ast.List, ast.Tuple))


def carries_graph(script: Script, expr: ast.AST, names: set[str]) -> bool:
    """Whether ``expr`` is (arithmetic on) a model output, a loss or a graph name, not cut by
    ``.item()``, ``.detach()``, ``float()`` and the like. A container literal carries what any
    of its values carries, and so does a ``dict(...)`` call: detaching one entry (``{"loss":
    loss.detach(), "metrics": m}``) leaves the others as they are."""
    if isinstance(expr, (ast.Dict, ast.List, ast.Tuple)):  # {"ce": criterion(out, y)}
        values = expr.values if isinstance(expr, ast.Dict) else expr.elts
        return any(carries_graph(script, v, names) for v in values)
    if _is_cut(expr):
        return False
    if isinstance(expr, ast.Name):
        return expr.id in names
    if isinstance(expr, COMPREHENSIONS):
        return comprehension_holds(expr, names, lambda n, h: carries_graph(script, n, h))
    if isinstance(expr, ast.BinOp):
        return carries_graph(script, expr.left, names) or carries_graph(script, expr.right, names)
    if isinstance(expr, ast.UnaryOp):
        return carries_graph(script, expr.operand, names)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and \
            expr.func.id == "dict" and script.callee(expr) is None:  # dict(loss=loss, step=i)
        return any(carries_graph(script, v, names)
                   for v in [*expr.args, *(k.value for k in expr.keywords)])
    if isinstance(expr, ast.Call):
        target = script.callee(expr)
        if target is not None and _returns_cut(script, target):
            return False  # def labeled_loss(...): ... return loss.item(): a number, by its body
        if is_loss_call(script, expr):
            return True
        f = expr.func
        k = script.key(f)
        if k and script.is_model(k) and k != "self" and (target is None or k in script.models):
            # (a function of this file named like a model, ``train_model(...)``, is judged by
            # what it returns below, not by its name)
            return True
        if target is not None and (returns_graph(script, target) or
                                   _passes_graph(script, expr, target, names)):
            return True
        if isinstance(f, ast.Attribute) and f.attr in _DIFFERENTIABLE and \
                carries_graph(script, f.value, names):
            return True  # out[:, :4].abs().mean()
        q = script.call_qualname(expr) or ""
        if q.startswith("torch.") and q.rsplit(".", 1)[-1] in _DIFFERENTIABLE_FUNCS and \
                expr.args and carries_graph(script, expr.args[0], names):
            return True  # F.softplus(out[:, 5]), torch.stack(parts)
        if q.endswith("autograd.grad") and is_true(kwarg(expr, "create_graph")):
            return True  # gradients with their own graph (a gradient penalty's double backward)
    if isinstance(expr, ast.Attribute) and expr.attr in _METADATA:
        return False  # out.requires_grad, out.shape: a flag or a size, no tensor
    if isinstance(expr, (ast.Subscript, ast.Attribute)):  # out[0], outputs.loss
        if isinstance(expr, ast.Subscript) and _entry_without_graph(script, expr, names):
            return False  # out["labels"] of {"loss": loss, "labels": y}
        if _self_attr(expr) is not None and _self_attr(expr) in names:
            return True  # self.loss, assigned a graph or backpropagated
        return carries_graph(script, expr.value, names)
    return False


def _entry_without_graph(script: Script, expr: ast.Subscript, names: set[str]) -> bool:
    """``out["labels"]`` where every value of ``out`` that reaches here is a dict built in view,
    with constant keys (``{"loss": loss, "labels": y}``, ``dict(loss=loss, labels=y)``, or a
    same-file function's result whose every ``return`` is one), and none of them puts a graph
    under that key: a step's dict holds the graph of its loss, not of its labels. False (judge
    the dict whole) when unsure: ``out`` bound otherwise or changed after it was built."""
    key = expr.slice
    if not (isinstance(expr.value, ast.Name) and isinstance(key, ast.Constant) and
            isinstance(key.value, str)):
        return False
    values = reaching_values(expr.value.id, expr)
    if not values or not _bound_whole(expr.value.id, scope_of(expr)):
        return False
    for value in values:
        entry = dict_entry(value, key.value)
        if entry is not None:
            if entry is not _ABSENT and (carries_graph(script, entry, names) or
                                         not _from_inputs(entry, scope_of(value), names)):
                return False
            continue
        func = script.callee(value) if isinstance(value, ast.Call) else None
        if func is None or not _returned_entries_without_graph(script, value, func, key.value,
                                                               names):
            return False
    return True


_ABSENT = ast.Constant(value=None)  # a dict built without the key


def dict_entry(value: ast.AST, key: object) -> ast.expr | None:
    """What a dict display or ``dict(k=v, ...)`` call puts under ``key`` (``_ABSENT`` if it
    has no such key); None when ``value`` is no such build, or when an entry whose key is not
    known comes after the last ``key`` (``{"loss": loss, **extra}``, ``{name: v}``): the later
    entry may replace it. ``{**base, "loss": loss}`` puts ``loss`` under ``"loss"``."""
    if isinstance(value, ast.Dict):
        pairs = list(zip(value.keys, value.values))
    elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
            value.func.id == "dict" and not value.args:
        pairs = [(ast.Constant(k.arg) if k.arg is not None else None, k.value)
                 for k in value.keywords]
    else:
        return None
    for k, v in reversed(pairs):  # (a later entry replaces an earlier one)
        if not isinstance(k, ast.Constant):
            return None  # ``**base`` or a computed key
        if k.value == key:
            return v
    return _ABSENT


def _bound_whole(name: str, scope: ast.AST) -> bool:
    """Every binding of ``name`` in ``scope`` is a plain ``name = value`` and nothing stores
    into it afterwards (``out["x"] = ...``, ``out.update(...)``, ``out.setdefault(...)``)."""
    for sub in walk_local(scope):
        if isinstance(sub, ast.Name) and sub.id == name and not isinstance(sub.ctx, ast.Load):
            p = parent(sub)
            if not (isinstance(p, ast.Assign) and sub in p.targets):
                return False
        if isinstance(sub, ast.Subscript) and not isinstance(sub.ctx, ast.Load) and \
                isinstance(sub.value, ast.Name) and sub.value.id == name:
            return False
        if isinstance(sub, ast.Attribute) and sub.attr in ("update", "setdefault", "__setitem__") \
                and isinstance(sub.value, ast.Name) and sub.value.id == name:
            return False
    return True


_MOVES = {"to", "cuda", "cpu", "long", "float", "int", "half", "bool", "squeeze", "unsqueeze",
          "view", "reshape", "flatten", "contiguous"}


def _from_inputs(expr: ast.AST, scope: ast.AST, names: set[str], depth: int = 3) -> bool:
    """``expr`` is only data the scope was given (a parameter that holds no graph, a batch
    unpacked from one, the items of a loader it iterates), indexed, moved or cast, or a cut
    value: labels (``x, y = batch``; ``y.to(device)``), never a forward's output. A name that
    holds a graph, or anything made by another call, is not."""
    if isinstance(expr, ast.Constant) or _cut_whole(expr) or isinstance(expr, ast.Call) and (
            isinstance(expr.func, ast.Name) and expr.func.id == "len" or
            isinstance(expr.func, ast.Attribute) and expr.func.attr in ("size", "numel")):
        return True  # a number (sizes carry no graph)
    if isinstance(expr, (ast.Tuple, ast.List)):
        return all(_from_inputs(e, scope, names, depth) for e in expr.elts)
    if isinstance(expr, ast.Subscript):
        return _from_inputs(expr.value, scope, names, depth)
    if isinstance(expr, ast.Call):
        f = expr.func
        if isinstance(f, ast.Attribute) and f.attr in _MOVES:
            return _from_inputs(f.value, scope, names, depth)
        return isinstance(f, ast.Name) and f.id in ("enumerate", "zip") and not expr.keywords \
            and all(_from_inputs(a, scope, names, depth) for a in expr.args)
    if not isinstance(expr, ast.Name) or expr.id in names or depth == 0:
        return False
    args = getattr(scope, "args", None)
    if args is not None and expr.id in {a.arg for a in args.posonlyargs + args.args +
                                        args.kwonlyargs} - {"self", "cls"}:
        return True
    sources = []
    for sub in walk_local(scope):
        if isinstance(sub, ast.Name) and sub.id == expr.id and isinstance(sub.ctx, ast.Store):
            n = parent(sub)
            while isinstance(n, (ast.Tuple, ast.List, ast.Starred)):
                n = parent(n)
            if isinstance(n, ast.Assign):
                sources.append(n.value)
            elif isinstance(n, ast.For):
                sources.append(n.iter)
            else:
                return False
    return bool(sources) and all(_from_inputs(v, scope, names, depth - 1) for v in sources)


def _returned_entries_without_graph(script: Script, call: ast.Call, func: ast.AST, key: str,
                                    names: set[str]) -> bool:
    """Every ``return`` of ``func`` is a dict build whose entry under ``key`` carries no graph,
    judged with the parameters that ``call`` hands a graph counted as graph names."""
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    rets = [r.value for r in walk_local(func) if isinstance(r, ast.Return)]
    entries = [dict_entry(r, key) if r is not None else None for r in rets]
    if not entries or any(e is None for e in entries):
        return False
    active = script.__dict__.setdefault("_tg_entry_active", set())
    if id(func) in active:
        return False  # (a recursive function: unsure while deciding)
    active.add(id(func))
    try:
        params = [a.arg for a in func.args.posonlyargs + func.args.args]
        if params[:1] == ["self"]:
            params = params[1:]
        bound = {p: a for p, a in zip(params, call.args) if not isinstance(a, ast.Starred)}
        bound.update({k.arg: k.value for k in call.keywords if k.arg})
        given = {p for p, a in bound.items() if carries_graph(script, a, names)}
        inner = graph_names(script, func, seed=given)
        return not any(e is not _ABSENT and (carries_graph(script, e, inner) or  # type: ignore
                                             not _from_inputs(e, func, inner))  # type: ignore
                       for e in entries)
    finally:
        active.discard(id(func))


def _passes_graph(script: Script, call: ast.Call, func: ast.AST, names: set[str]) -> bool:
    """A same-file helper given a graph tensor returns arithmetic on it: ``mse =
    masked_mse(mean, x, mask)`` for ``def masked_mse(mean, x, mask): return ((mean - x) ** 2
    * mask).sum() / mask.sum()``. Only the helper's ``return`` expressions are read (its
    parameters that received a graph count as graph names there)."""
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) or \
            script.grad_disabled(func) or not call.args:
        return False
    params = [a.arg for a in func.args.posonlyargs + func.args.args]
    if params[:1] == ["self"]:
        params = params[1:]
    bound = {p: a for p, a in zip(params, call.args) if not isinstance(a, ast.Starred)}
    bound.update({k.arg: k.value for k in call.keywords if k.arg})
    active = script.__dict__.setdefault("_tg_passes_graph", set())
    if id(func) in active:
        return False  # (a recursive helper: not while deciding)
    active.add(id(func))
    try:
        given = frozenset(p for p, a in bound.items() if carries_graph(script, a, names))
        if not given:
            return False
        memo = script.__dict__.setdefault("_tg_passes_memo", {})
        key = (id(func), given)
        if key not in memo:
            memo[key] = any(isinstance(r, ast.Return) and r.value is not None and
                            carries_graph(script, r.value, set(given))
                            for r in walk_local(func))
        return memo[key]
    finally:
        active.discard(id(func))


def numeric_only(script: Script, name: str, scope: ast.AST, skip: set[int], *,
                 depth: int = 1) -> bool:
    """Whether every read of ``name`` in ``scope`` (other than the nodes in ``skip``) uses it as
    a plain number: printed, logged, formatted, compared, or in arithmetic that is."""
    for sub in walk_local(scope, into_defs=True):
        if isinstance(sub, ast.Name) and sub.id == name and isinstance(sub.ctx, ast.Load) and \
                id(sub) not in skip:
            if not _numeric_use(script, sub, scope, depth):
                return False
    return True


def _numeric_use(script: Script, node: ast.AST, scope: ast.AST, depth: int) -> bool:
    p = parent(node)
    while isinstance(p, (ast.BinOp, ast.UnaryOp)):
        node, p = p, parent(p)
    if isinstance(p, (ast.FormattedValue, ast.Compare)):
        return True
    if isinstance(p, ast.AugAssign):
        return p.target is node or isinstance(p.target, ast.Name)
    if isinstance(p, ast.Call) and node is not p.func:
        fname = (dotted(p.func) or "").rsplit(".", 1)[-1]
        return fname in _NUMERIC_CALLS or fname in ("mean", "sum", "fsum") and depth == 1
    if isinstance(p, ast.Assign) and depth > 0 and len(p.targets) == 1 and \
            isinstance(p.targets[0], ast.Name):
        return numeric_only(script, p.targets[0].id, scope, set(), depth=depth - 1)
    return False


def _returned_parts(script: Script, value: ast.AST, n: int) -> list[bool] | None:
    """For ``a, b, c = helper(...)`` with a same-file ``helper`` whose every return is a tuple
    of ``n`` values: which of them carry a graph (``return loss.item(), acc.item(), pred``
    gives only the third). None when the returns do not say."""
    func = script.callee(value) if isinstance(value, ast.Call) else None
    if func is None:
        return None
    memo = script.__dict__.setdefault("_tg_returned_parts", {})
    if (id(func), n) in memo:
        return memo[(id(func), n)]
    memo[(id(func), n)] = None  # a recursive function: unknown while deciding
    rets = [r.value for r in walk_local(func) if isinstance(r, ast.Return)]
    found = None
    if rets and all(isinstance(r, ast.Tuple) and len(r.elts) == n for r in rets):
        names = graph_names(script, func)
        found = [any(carries_graph(script, r.elts[i], names) for r in rets)  # type: ignore
                 for i in range(n)]
    memo[(id(func), n)] = found
    return found


def _forwards_without_grad(script: Script, func: ast.AST) -> bool:
    """Every model call of ``func`` runs with grad disabled (an evaluation that runs its
    forwards under ``torch.no_grad()`` and returns the loss it accumulated there): what it
    returns carries no graph. False when it calls no model."""
    calls = [c for c in walk_local(func) if isinstance(c, ast.Call) and
             (k := script.key(c.func)) and k != "self" and script.is_model(k)]
    return bool(calls) and all(script.grad_disabled(c) for c in calls)


def _returns_cut(script: Script, func: ast.AST) -> bool:
    """Every ``return`` of ``func`` gives a cut value: ``.item()``, ``.detach()``, ``float()``,
    or a name last assigned one above it (``loss = F.cross_entropy(...).item(); return
    loss``). Decided once per function (``carries_graph`` asks at every call of it)."""
    memo = script.__dict__.setdefault("_tg_returns_cut", {})
    if id(func) not in memo:
        memo[id(func)] = _all_returns_cut(func)
    return memo[id(func)]


def _all_returns_cut(func: ast.AST) -> bool:
    rets = [r.value for r in walk_local(func) if isinstance(r, ast.Return)]
    if not rets or any(v is None for v in rets):
        return False
    for ret in rets:
        for value in ret.elts if isinstance(ret, (ast.Tuple, ast.List)) else [ret]:
            if isinstance(value, ast.Name):
                value = last_assignment(value.id, value)
            if value is None or not _cut_whole(value):
                return False
    return True


def _cut_whole(expr: ast.AST) -> bool:
    """The value itself is cut, not a part of it: ``loss.item()``, ``out.detach().cpu()``,
    ``float(loss)`` (``a + b.detach()`` keeps ``a``'s graph)."""
    node = expr
    while isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Name):
            return f.id in ("float", "int", "round")
        if not isinstance(f, ast.Attribute):
            return False
        if f.attr in CUTS:
            return True
        node = f.value
    return isinstance(node, ast.Attribute) and node.attr in CUTS  # x.data


def returns_graph(script: Script, func: ast.AST) -> bool:
    """Whether a same-file function returns a tensor that carries a graph (a loss it computed
    and backpropagated, a model output), grad enabled: ``loss = self.discriminator_step(...)``."""
    memo = script.__dict__.setdefault("_tg_returns_graph", {})
    if id(func) in memo:
        return memo[id(func)]
    memo[id(func)] = False  # a recursive function: assume not while deciding
    found = False
    if not script.grad_disabled(func) and not _forwards_without_grad(script, func):
        names = graph_names(script, func)
        for r in walk_local(func):
            if isinstance(r, ast.Return) and r.value is not None:
                values = r.value.elts if isinstance(r.value, ast.Tuple) else [r.value]
                if any(carries_graph(script, v, names) for v in values):
                    found = True
                    break
    memo[id(func)] = found
    return found
