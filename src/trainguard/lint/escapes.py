"""Where a value goes: whether what a forward computed can ever reach a backward.

``stays_out_of_backward(script, node)`` follows the value of expression ``node`` through the
file: into the names, attributes and containers it is stored in, through the functions of the
file it is handed to or returned from (to every call site), and through the expressions
built from it. It answers True only when every path ends where no graph goes on: a Python
number or list (``.item()``, ``.tolist()``, ``float()``), a comparison (a bool tensor has no
``grad_fn``), ``.detach()``, metadata (``.shape``, ``.grad_fn``), a string or ``print``, or a
value dropped. Anything else ends the answer at False (may reach a backward): ``.backward()``,
``torch.autograd``, an optimizer, a call this file does not define, a value returned from a
function no code of the file calls, a module-level name (other modules may import it; not one
bound under ``if __name__ == "__main__":``), an attribute named in a string, or more paths than
the budget.
"""

from __future__ import annotations

import ast

from trainguard.lint.astutil import is_main_guard, parent
from trainguard.lint.callgraph import bind_arguments
from trainguard.lint.script import Script

__all__ = ["stays_out_of_backward"]

_META = frozenset({"shape", "dtype", "device", "ndim", "grad_fn", "requires_grad", "is_leaf",
                   "is_cuda", "layout"})
_NO_GRAPH_METHODS = frozenset({"item", "tolist", "numpy", "detach", "size", "dim", "numel",
                               "argmax", "argmin", "long", "int", "bool", "eq", "ne", "lt",
                               "gt", "le", "ge", "equal", "nelement", "ndimension"})
_NO_GRAPH_BUILTINS = frozenset({"print", "len", "float", "int", "str", "bool", "repr",
                                "format", "isinstance", "type", "round", "id", "hash"})
_PASS_BUILTINS = frozenset({"list", "tuple", "zip", "enumerate", "sorted", "reversed", "sum",
                            "max", "min", "iter", "next", "dict", "set", "map", "filter"})
_STORE_METHODS = frozenset({"append", "extend", "insert", "add", "update", "setdefault",
                            "appendleft"})
# Modules whose functions compute a value from their arguments and keep nothing (a writer's
# method, an optimizer or a parameter made from the value are not such functions).
_OP_MODULES = frozenset({"torch", "torch.nn.functional", "torch.linalg", "torch.fft",
                         "torch.special", "numpy", "math"})
_BUDGET = 300


def stays_out_of_backward(script: Script, node: ast.expr) -> bool:
    """Whether the value of ``node`` provably never reaches a backward (see the module)."""
    walk = _Walk(script)
    return walk.follow(node)


class _Walk:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.seen: set[int] = set()
        self.steps = 0

    def follow(self, node: ast.AST) -> bool:
        """Every use of the value of ``node`` ends without a graph going on."""
        if id(node) in self.seen:
            return True
        self.seen.add(id(node))
        self.steps += 1
        if self.steps > _BUDGET:
            return False
        p = parent(node)
        if p is None:
            return False
        if isinstance(p, ast.Attribute):
            return self._attribute(p)
        if isinstance(p, ast.keyword):
            p2 = parent(p)
            return isinstance(p2, ast.Call) and self._argument(p2, node)
        if isinstance(p, ast.Starred):
            return self.follow(p)
        if isinstance(p, ast.Call):
            return self._argument(p, node)
        if isinstance(p, (ast.Compare, ast.JoinedStr, ast.FormattedValue)) or \
                isinstance(p, (ast.If, ast.While, ast.Assert)) and node is p.test:
            return True  # a bool tensor or a string: no graph
        if isinstance(p, ast.Expr):
            return True  # dropped
        if isinstance(p, (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Subscript, ast.Tuple,
                          ast.List, ast.Set, ast.Dict, ast.IfExp, ast.Slice)):
            return self.follow(p)
        if isinstance(p, ast.comprehension):
            comp = parent(p)
            return self._bound(p.target, comp) and self.follow(comp)  # type: ignore[arg-type]
        if isinstance(p, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            return self.follow(p)  # its element
        if isinstance(p, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = p.targets if isinstance(p, ast.Assign) else [p.target]
            return all(self._stored(t) for t in targets)
        if isinstance(p, (ast.For, ast.AsyncFor)) and node is p.iter:
            return self._bound(p.target, p)
        if isinstance(p, (ast.Return, ast.Yield, ast.YieldFrom)):
            return self._returned(p)
        if isinstance(p, ast.Await):
            return self.follow(p)
        return False

    def _attribute(self, attr: ast.Attribute) -> bool:
        if attr.attr in _META:
            return True
        call = parent(attr)
        if isinstance(call, ast.Call) and call.func is attr:
            if attr.attr in _NO_GRAPH_METHODS:
                return True
            if attr.attr == "backward":
                return False
            if attr.attr in _STORE_METHODS:
                return True  # bank.append(x) on it: what it holds stays where it is
            return self.follow(call)  # out.softmax(1), feats.mean(): a value made from it
        return self.follow(attr)  # out.T, result.indices

    def _argument(self, call: ast.Call, arg: ast.AST) -> bool:
        script = self.script
        f = call.func
        if isinstance(f, ast.Name) and f.id not in script.functions and \
                f.id not in script.classes:
            if f.id in _NO_GRAPH_BUILTINS:
                return True
            if f.id in _PASS_BUILTINS:
                return self.follow(call)
        if isinstance(f, ast.Attribute) and f.attr in _STORE_METHODS:
            return self._stored(f.value)  # bank.append(feats): bank holds it
        q = script.call_qualname(call) or ""
        if q.startswith(("torch.optim", "torch.autograd")) or "backward" in q:
            return False
        if q.rsplit(".", 1)[0] in _OP_MODULES:
            return self.follow(call)  # torch.cat(outs), F.softmax(logits)
        key = script.key(f)
        if key and script.is_model(key):
            return self.follow(call)  # a model run on it: its output carries it on
        targets = script.targets(call)
        if not targets or any(t.script is not script for t in targets):
            return False  # a call this file does not define: anything may happen
        for t in targets:
            if getattr(t.func, "name", "") == "__init__":
                return False  # an object built around it keeps it
            names = [a.arg for a in t.func.args.posonlyargs + t.func.args.args]
            if names and names[0] in ("self", "cls") and (t.bound or t.instance):
                names = names[1:]
            bound = bind_arguments(names, call)
            param = next((k for k, v in bound.items() if v is arg), None)
            if param is None:
                return False  # (*args, **kwargs: not followed)
            loads = [n for n in ast.walk(t.func) if isinstance(n, ast.Name) and
                     n.id == param and isinstance(n.ctx, ast.Load)]
            if not all(self.follow(n) for n in loads):
                return False
        return self.follow(call)  # what the function returns may hold it

    def _stored(self, target: ast.AST) -> bool:
        """Every later read of what ``target`` (a name, attribute or item) now holds."""
        while isinstance(target, (ast.Subscript, ast.Starred)):
            target = target.value
        if isinstance(target, (ast.Tuple, ast.List)):
            return all(self._stored(e) for e in target.elts)
        if isinstance(target, ast.Name):
            return self._name_loads(target)
        if isinstance(target, ast.Attribute):
            attr = target.attr
            if any(isinstance(n, ast.Constant) and n.value == attr for n in self.script.nodes):
                return False  # getattr(obj, "bank"): reads not followed
            return all(self.follow(n) for n in self.script.nodes
                       if isinstance(n, ast.Attribute) and n.attr == attr and
                       isinstance(n.ctx, ast.Load))
        return False

    def _name_loads(self, name: ast.Name) -> bool:
        scope = self.script.enclosing_function(name)
        if scope is None:
            if not _under_main_guard(name):
                return False  # a module-level name: other modules may import it
            reads = [n for n in self.script.nodes if isinstance(n, ast.Name) and
                     n.id == name.id and isinstance(n.ctx, ast.Load)]
        else:
            if any(isinstance(n, (ast.Global, ast.Nonlocal)) and name.id in n.names
                   for n in ast.walk(scope)):
                return False
            reads = [n for n in ast.walk(scope) if isinstance(n, ast.Name) and
                     n.id == name.id and isinstance(n.ctx, ast.Load)]
        return all(self.follow(n) for n in reads)

    def _bound(self, target: ast.AST, scope: ast.AST) -> bool:
        """The names a loop or comprehension binds from the value: each of their reads."""
        names = [n for n in ast.walk(target) if isinstance(n, ast.Name)]
        if isinstance(scope, (ast.For, ast.AsyncFor)):
            return all(self._name_loads(n) for n in names)
        return all(self.follow(r) for n in names for r in ast.walk(scope)
                   if isinstance(r, ast.Name) and r.id == n.id and
                   isinstance(r.ctx, ast.Load))

    def _returned(self, stmt: ast.AST) -> bool:
        func = stmt
        while (func := parent(func)) is not None and \
                not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            pass
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
        sites = [c for c in self.script.graph.sites(func)
                 if any(t.func is func for t in self.script.targets(c))]
        if not sites:
            return False  # called from elsewhere: its callers are not read here
        if any(_named(n, func.name) and not (isinstance(parent(n), ast.Call) and
                                             parent(n).func is n)  # type: ignore[union-attr]
               for n in self.script.nodes):
            return False  # handed on as a value (map(extract, xs), a callback): not followed
        return all(self.follow(c) for c in sites)


def _named(node: ast.AST, name: str) -> bool:
    """``node`` reads ``name`` or ``<obj>.name``."""
    return isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load) or \
        isinstance(node, ast.Attribute) and node.attr == name and isinstance(node.ctx, ast.Load)


def _under_main_guard(node: ast.AST) -> bool:
    n = node
    while (n := parent(n)) is not None:
        if is_main_guard(n):
            return True
    return False
