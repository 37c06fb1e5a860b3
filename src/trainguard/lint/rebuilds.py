"""Tensors rebuilt from values that carry a graph: ``torch.tensor(log_probs)`` on a list of
log-probabilities a policy returned copies their numbers into a new leaf with no ``grad_fn``
(``torch.stack`` would keep the graph), and so does a trip through NumPy
(``torch.from_numpy(np.array(outs))``). What is built from it alone has no graph.

:func:`loss_sources` follows the tensor that ``backward()`` runs on back through the names of
its function, the same-file helpers it calls (into what they return, their parameters bound to
the caller's arguments) and the parameters of its own function (to the arguments of every call
site), and says which of its sources carry a graph, which are such rebuilds, and whether some
could not be followed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from trainguard.lint.astutil import dotted, walk_local
from trainguard.lint.callgraph import self_assigned, bind_arguments
from trainguard.lint.cuts import CUT_ATTRS
from trainguard.lint.dataflow import last_assignment, stored_items
from trainguard.lint.script import Script

__all__ = ["Sources", "loss_sources", "REBUILD"]

REBUILD = {"torch.tensor", "torch.as_tensor", "torch.Tensor", "torch.FloatTensor",
           "torch.DoubleTensor", "torch.from_numpy", "torch.autograd.Variable"}
_NUMPY_COPY = {"numpy.array", "numpy.asarray", "numpy.stack", "numpy.concatenate",
               "numpy.vstack", "numpy.hstack"}
_STORES = {"append", "insert", "extend", "appendleft"}


@dataclass
class Sources:
    graph: bool = False  # an uncut path reaches a model output or a parameter
    unknown: bool = False  # some value could not be followed
    rebuilds: list[tuple[ast.Call, str]] = field(default_factory=list)  # (call, container)


def loss_sources(script: Script, expr: ast.AST, depth: int = 8) -> Sources:
    out = Sources()
    _Walk(script, out).visit(expr, expr, {}, depth)
    return out


class _Walk:
    def __init__(self, script: Script, out: Sources) -> None:
        self.script, self.out = script, out
        self.seen: set[int] = set()

    def visit(self, expr: ast.AST, at: ast.AST, env: dict, depth: int) -> None:
        if depth <= 0 or id(expr) in self.seen:
            self.out.unknown |= depth <= 0
            return
        self.seen.add(id(expr))
        s = self.script
        if isinstance(expr, ast.Name):
            self._name(expr, at, env, depth)
        elif isinstance(expr, ast.Call):
            self._call(expr, at, env, depth)
        elif isinstance(expr, ast.Attribute):
            if expr.attr == "data":
                return
            k = s.key(expr)
            if k and k.startswith("self.") and k.count(".") == 1:
                if s.is_model(k) or _is_parameter(s, expr):
                    self.out.graph = True
                    return
                cls = s.enclosing_class(expr)  # self.loss = ... in another method
                for value in self_assigned(cls, expr.attr) if cls is not None else ():
                    self.visit(value, value, {}, depth - 1)
                for value in _stored(s, expr, at):  # a list the class appends to
                    self.visit(value, value, {}, depth - 1)
                return
            self.visit(expr.value, at, env, depth)
        elif isinstance(expr, (ast.Lambda, ast.Compare, ast.JoinedStr)):
            return
        else:
            for child in ast.iter_child_nodes(expr):
                if isinstance(child, ast.expr):
                    self.visit(child, at, env, depth)

    def _name(self, expr: ast.Name, at: ast.AST, env: dict, depth: int) -> None:
        s = self.script
        if expr.id in s.aliases or expr.id in ("self", "True", "False", "None"):
            return
        if expr.id in env:
            value, outer = env[expr.id]
            self.visit(value, value, outer, depth - 1)
            return
        value = last_assignment(expr.id, at)
        if value is not None:
            self.visit(value, value, env, depth - 1)
            for item in stored_items(expr.id, value):  # log_probs = [] ... .append(lp)
                self.visit(item, item, env, depth - 1)
            return
        func = s.enclosing_function(at)
        if func is None or expr.id not in [a.arg for a in func.args.args]:
            self.out.unknown = True  # a loop variable, a tuple target, a global
            return
        sites = s.call_sites(func)
        if not sites:
            self.out.unknown = True
        for call in sites:
            bound = bind_arguments(_params(func, call), call)
            if expr.id not in bound:
                self.out.unknown = True
                continue
            self.visit(bound[expr.id], call, {}, depth - 1)

    def _call(self, expr: ast.Call, at: ast.AST, env: dict, depth: int) -> None:
        s = self.script
        f = expr.func
        q = s.call_qualname(expr) or ""
        if q in REBUILD and expr.args:
            box = _container(s, expr.args[0], at)
            if box is not None and _holds_graph(s, box, at, env=env):
                self.out.rebuilds.append((expr, s.segment(box) or "a list"))
            return
        if isinstance(f, ast.Attribute) and f.attr in CUT_ATTRS:
            return
        if isinstance(f, ast.Attribute) and f.attr in ("parameters", "named_parameters"):
            self.out.graph = True
            return
        # criterion(emb, y): a loss module of the file, followed into its forward
        func = _forward(s, expr) if isinstance(f, (ast.Name, ast.Attribute)) else None
        k = s.key(f)
        if func is None and k and k != "self" and s.is_model(k):
            self.out.graph = True
            return
        if func is None:
            func = s.callee(expr)
        if func is not None:
            rets = [r.value for r in walk_local(func) if isinstance(r, ast.Return) and r.value]
            names = _params(func, expr)
            if func.name == "forward" and names and names[0] == "self":
                names = names[1:]
            bound = {n: (v, env) for n, v in bind_arguments(names, expr).items()}
            for r in rets:
                self.visit(r, r, bound, depth - 1)
            return
        for child in [*expr.args, *(kw.value for kw in expr.keywords)]:
            self.visit(child, at, env, depth)
        if isinstance(f, ast.Attribute):
            self.visit(f.value, at, env, depth)


def _forward(script: Script, call: ast.Call) -> ast.FunctionDef | None:
    """The ``forward`` a call of an instance of a same-file module class without parameters of
    its own runs (a loss module: ``criterion = TripletLoss(margin)``, then
    ``criterion(emb, labels)``); a module with parameters is a model, whose output carries a
    graph already."""
    found = [t for t in script.graph.instance_targets(call) if t.script is script]
    if len(found) != 1 or not isinstance(found[0].func, ast.FunctionDef):
        return None
    cls = script.enclosing_class(found[0].func)
    if cls is None or any(isinstance(n, ast.Call) and (
            (script.call_qualname(n) or "").endswith("Parameter") or
            (script.call_qualname(n) or "").startswith("torch.nn.")) for n in ast.walk(cls)
            if script.enclosing_function(n) is not None and
            script.enclosing_function(n).name == "__init__"):
        return None
    return found[0].func


def _params(func: ast.AST, call: ast.Call) -> list[str]:
    names = [a.arg for a in func.args.args]  # type: ignore[attr-defined]
    if names and names[0] in ("self", "cls") and isinstance(call.func, ast.Attribute):
        names = names[1:]
    return names


def _is_parameter(script: Script, attr: ast.Attribute) -> bool:
    cls = script.enclosing_class(attr)
    if cls is None:
        return False
    for n in ast.walk(cls):
        if isinstance(n, ast.Assign) and any(dotted(t) == dotted(attr) for t in n.targets) and \
                isinstance(n.value, ast.Call) and \
                (script.call_qualname(n.value) or "").endswith("Parameter"):
            return True
    return False


def _container(script: Script, arg: ast.AST, at: ast.AST) -> ast.expr | None:
    """The list that a rebuild copies: ``xs`` in ``torch.tensor(xs)``,
    ``torch.from_numpy(np.array(xs))`` or ``arr = np.array(xs); torch.from_numpy(arr)``."""
    for _ in range(3):
        if isinstance(arg, ast.Call) and (script.call_qualname(arg) or "") in _NUMPY_COPY \
                and arg.args:
            arg = arg.args[0]
            continue
        if isinstance(arg, ast.Name):
            value = last_assignment(arg.id, at)
            if isinstance(value, ast.Call) and \
                    (script.call_qualname(value) or "") in _NUMPY_COPY:
                arg = value
                continue
        break
    if isinstance(arg, (ast.Name, ast.Attribute, ast.ListComp, ast.List)):
        return arg  # type: ignore[return-value]
    return None


def _holds_graph(script: Script, box: ast.expr, at: ast.AST, depth: int = 8, *,
                 env: dict | None = None) -> bool:
    """Whether an element stored in the list carries a graph (computed with grad enabled from
    a model output or a parameter, not cut); ``env``: the parameters of the function around
    it, bound to a caller's arguments."""
    if isinstance(box, ast.ListComp):
        elements = [box.elt]
    elif isinstance(box, ast.List):
        elements = list(box.elts)
    else:
        elements = _stored(script, box, at)
    for e in elements:
        if script.grad_disabled(e):
            continue
        found = Sources()
        _Walk(script, found).visit(e, e, env or {}, depth)
        if found.graph and not found.rebuilds:
            return True
    return False


def _stored(script: Script, box: ast.expr, at: ast.AST) -> list[ast.expr]:
    """What ``box.append(e)`` and the like put into the list: anywhere in the class for
    ``self.xs``, in the same function for a local name."""
    key = dotted(box)
    if key is None:
        return []
    if key.startswith("self."):
        scope: ast.AST | None = script.enclosing_class(at)
    else:
        scope = script.enclosing_function(at) or script.tree
        value = last_assignment(key, at)
        if isinstance(value, ast.ListComp):
            return [value.elt]
    if scope is None:
        return []
    out = []
    for n in ast.walk(scope):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                n.func.attr in _STORES and dotted(n.func.value) == key and n.args:
            out.append(n.args[-1])
    return out
