"""A small constant evaluator: the value of an expression when the file fixes it.

``N = 1025``, ``EPOCHS = 10; milestones=[int(0.6 * EPOCHS)]``, ``cfg = {"train": {"bs": 64}}``
then ``cfg["train"]["bs"]`` or ``cfg.get("act")``, ``len([...])``: numbers, strings, lists, tuples and dicts built from
literals, arithmetic, ``int``/``float``/``round``/``min``/``max``/``abs``/``len``, subscripts, and
names assigned exactly once (in the function, else at module level) and never changed in place.
Anything else is unknown (``...``). Nothing is run.
"""

from __future__ import annotations

import ast
import json
import operator
from typing import Any

from trainguard.lint.astutil import SCOPES, children, dotted, parent

__all__ = ["const_eval", "truth", "resolve", "UNKNOWN", "built_at_import"]

UNKNOWN: Any = ...
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
           ast.Pow: operator.pow}
_FUNCS = {"int": int, "float": float, "round": round, "min": min, "max": max, "abs": abs,
          "len": len, "list": list, "tuple": list, "sorted": sorted}  # (a tuple reads as a list)
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
            ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
            ast.Is: operator.is_, ast.IsNot: operator.is_not}


def truth(test: ast.AST | None, *, env: dict[str, ast.expr] | None = None) -> bool | None:
    """Whether an ``if``/``while`` test is always true or always false by the file's own
    constants (``DEBUG = False`` ... ``if DEBUG:``; ``if not USE_AMP``; ``if ACCUM == 1``), or
    None when the file does not fix it. A file that rewrites its globals at run time
    (``exec(open("config.py").read())``, ``globals().update(...)``) fixes nothing at module
    level: see :func:`module_constants_trusted`. ``env`` binds names as in :func:`const_eval`."""
    if test is None:
        return None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = truth(test.operand, env=env)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        values = [truth(v, env=env) for v in test.values]
        if isinstance(test.op, ast.And):
            if any(v is False for v in values):
                return False
            return True if all(v is True for v in values) else None
        if any(v is True for v in values):
            return True
        return False if all(v is False for v in values) else None
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _COMPARE:
        a, b = const_eval(test.left, env=env), const_eval(test.comparators[0], env=env)
        if a is UNKNOWN or b is UNKNOWN:
            return None
        try:
            return bool(_COMPARE[type(test.ops[0])](a, b))
        except TypeError:
            return None
    value = const_eval(test, env=env)
    if value is UNKNOWN or isinstance(value, (dict, list)) and not isinstance(test, ast.Name):
        return None
    try:
        return bool(value)
    except Exception:  # a value whose truth Python itself cannot tell
        return None


def module_constants_trusted(tree: ast.Module, source: str) -> bool:
    """False when the file may rebind its module-level names behind the parser's back
    (``exec(...)`` of a config file, as nanoGPT's configurator does; ``globals()`` writes)."""
    return "exec(" not in source and "globals()" not in source


def const_eval(expr: ast.AST | None, *, env: dict[str, ast.expr] | None = None,
               _depth: int = 8) -> Any:
    """The value of ``expr`` if the source fixes it, else ``UNKNOWN`` (``...``). ``env`` binds
    names to the expressions a caller passed for them (a function's parameters at one call
    site: ``make_loader(x, batch_size=64)``); those are evaluated where the caller wrote them."""
    if expr is None or _depth <= 0:
        return UNKNOWN
    d = _depth - 1
    if env and isinstance(expr, ast.Name) and expr.id in env:
        return const_eval(env[expr.id], _depth=d)
    if env:
        return _with_env(expr, env, d)
    try:
        if isinstance(expr, ast.Constant):
            return expr.value
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
            v = const_eval(expr.operand, _depth=d)
            return not v if isinstance(v, bool) else UNKNOWN
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
            v = const_eval(expr.operand, _depth=d)
            return UNKNOWN if not _number(v) else (-v if isinstance(expr.op, ast.USub) else v)
        if isinstance(expr, ast.BinOp) and type(expr.op) in _BINOPS:
            a, b = const_eval(expr.left, _depth=d), const_eval(expr.right, _depth=d)
            if _number(a) and _number(b) and abs(b) < 1e6:
                return _BINOPS[type(expr.op)](a, b)
            if isinstance(expr.op, ast.Mult) and isinstance(a, list) and isinstance(b, int) \
                    and b < 1000:
                return a * b
            return UNKNOWN
        # A literal's elements are evaluated at the literal's own depth: nesting in a
        # literal is finite, and a config nested three deep must stay readable.
        if isinstance(expr, (ast.List, ast.Tuple)):
            vals = [const_eval(e, _depth=_depth) for e in expr.elts]
            return UNKNOWN if any(v is UNKNOWN for v in vals) else list(vals)
        if isinstance(expr, ast.Dict):
            out = {}
            for k, v in zip(expr.keys, expr.values):
                key = const_eval(k, _depth=_depth) if k is not None else UNKNOWN
                if key is UNKNOWN:
                    continue  # a ** spread or a computed key: that entry is unknown
                out[key] = const_eval(v, _depth=_depth)
            return out
        if isinstance(expr, ast.Subscript):
            base = const_eval(expr.value, _depth=d)
            key = const_eval(expr.slice, _depth=d)
            if isinstance(base, dict) and not isinstance(key, (list, dict)) and key in base:
                return base[key]
            if isinstance(base, list) and isinstance(key, int) and -len(base) <= key < len(base):
                return base[key]
            return UNKNOWN
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and \
                expr.func.id in _FUNCS and not expr.keywords:
            args = [const_eval(a, _depth=d) for a in expr.args]
            if args and all(a is not UNKNOWN for a in args):
                return _FUNCS[expr.func.id](*args)
            return UNKNOWN
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and \
                expr.func.attr == "get" and 1 <= len(expr.args) <= 2 and not expr.keywords:
            base = const_eval(expr.func.value, _depth=d)  # cfg.get("act", None)
            key = const_eval(expr.args[0], _depth=d)
            if not isinstance(base, dict) or isinstance(key, (list, dict)) or key is UNKNOWN:
                return UNKNOWN
            if key in base:
                return base[key]
            return const_eval(expr.args[1], _depth=d) if len(expr.args) == 2 else None
        if isinstance(expr, ast.Call) and dotted(expr.func) == "json.loads" and \
                len(expr.args) == 1 and not expr.keywords:
            text = const_eval(expr.args[0], _depth=d)  # CONFIG = json.loads("""{...}""")
            return json.loads(text) if isinstance(text, str) else UNKNOWN
        if isinstance(expr, ast.Call) and dotted(expr.func) in ("dict",) and not expr.args:
            return {k.arg: const_eval(k.value, _depth=d) for k in expr.keywords if k.arg}
        if isinstance(expr, ast.Call) and (dotted(expr.func) or "").endswith("Namespace"):
            from trainguard.lint.records import namespace_instance

            return namespace_instance(expr, d)  # SimpleNamespace(**CONFIG["trainer"])
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name):
            from trainguard.lint.records import dataclass_instance

            return dataclass_instance(expr, d)
        if isinstance(expr, ast.Name):
            value = _single_value(expr)
            return const_eval(value, _depth=d) if value is not None else UNKNOWN
        if isinstance(expr, ast.Attribute) and isinstance(expr.ctx, ast.Load):
            from trainguard.lint.records import field_value

            return field_value(expr, const_eval(expr.value, _depth=d))  # cfg.epochs
    except (ArithmeticError, TypeError, ValueError, OverflowError, RecursionError):
        return UNKNOWN
    return UNKNOWN


def _with_env(expr: ast.AST, env: dict[str, ast.expr], depth: int) -> Any:
    """``const_eval`` of an expression whose names may be bound by ``env``: the bound names
    are replaced by their values (when known) in a copy, which is evaluated as usual."""
    names = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)} & set(env)
    if not names:
        return const_eval(expr, _depth=depth)
    values = {}
    for name in names:
        v = const_eval(env[name], _depth=depth)
        if v is UNKNOWN or not isinstance(v, (int, float, str, bool, type(None), dict, list)):
            return UNKNOWN
        values[name] = v
    return const_eval(with_constants(expr, values), _depth=depth)


def with_constants(expr: ast.AST, values: dict[str, Any]) -> ast.AST:
    """A copy of ``expr`` in which each name in ``values`` is that constant, linked to the
    original's parent (names left in it resolve in the original scope). Copied through its
    source text: a deep copy would follow the parent links and copy the whole module."""

    class _Bind(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            if node.id in values:
                return ast.copy_location(ast.Constant(values[node.id]), node)
            return node

    bound = _Bind().visit(ast.parse(ast.unparse(expr), mode="eval").body)
    _link(bound, parent(expr))
    return bound


def _link(node: ast.AST, up: ast.AST | None) -> None:
    """Parent links for a copied expression, so names left in it resolve in the original
    scope."""
    node._tg_parent = up  # type: ignore[attr-defined]
    for child in ast.iter_child_nodes(node):
        _link(child, node)


def resolve(script: Any, expr: ast.AST | None, *, _depth: int = 3) -> Any:
    """``const_eval``, and also the values a configuration gives at run time where the program
    fixes them: a parameter of the function around ``expr`` bound to the same constant at every
    call (``def train(cfg)`` ... ``train(CONFIG)``, then ``cfg["epochs"]``); ``self.x`` set once
    in the class, from an ``__init__`` parameter whose instantiations agree
    (``ExponentialLR(opt, gamma=self.gamma)`` with ``def __init__(self, gamma=0.8)``;
    ``self.cfg["step_size"]``); ``args.x`` of an ``argparse`` namespace, by the option's
    default (the value of a run as written)."""
    value = const_eval(expr)
    if value is not UNKNOWN or expr is None:
        return value
    single = _single_value(expr) if isinstance(expr, ast.Name) and _depth > 0 else None
    if single is not None:  # n = self.cfg["size"], then n
        return resolve(script, single, _depth=_depth - 1)
    env: dict[str, ast.expr] = {}
    copy = ast.parse(ast.unparse(expr), mode="eval").body
    _link(copy, parent(expr))

    class _Bind(ast.NodeTransformer):
        def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
            if isinstance(node.value, ast.Name):
                bound = None
                if node.value.id == "self":
                    bound = _self_value(script, expr, node.attr)
                elif isinstance(node.ctx, ast.Load):
                    from trainguard.lint.options import argparse_default

                    bound = argparse_default(expr, node.value.id, node.attr, script)
                if bound is not None:
                    name = f"_tg_{node.value.id}_{node.attr}"
                    env[name] = bound
                    return ast.copy_location(ast.Name(name, ast.Load()), node)
            return self.generic_visit(node)

        def visit_Name(self, node: ast.Name) -> ast.AST:
            bound = _param_value(script, expr, node.id)
            if bound is not None and _depth > 0 and const_eval(bound) is UNKNOWN:
                # the caller's argument is its own configuration: `main(cfg)` passes
                # `cfg["trainer"]["lr_scheduler"]` to `create_scheduler(cfg, opt)`
                v = resolve(script, bound, _depth=_depth - 1)
                bound = None if v is UNKNOWN else ast.Constant(v)
            if bound is None and _depth > 0:
                bound = _local_value(script, expr, node.id, _depth - 1)
            if bound is None and _depth > 0 and _single_value(node) is None:
                bound = _imported_value(script, node.id)
            if bound is not None:
                env[node.id] = bound
            return node

    copy = _Bind().visit(copy)
    if not env:
        return UNKNOWN
    _link(copy, parent(expr))
    return const_eval(copy, env=env)


def _param_value(script: Any, at: ast.AST, name: str) -> ast.expr | None:
    """The argument every call of the function around ``at`` passes for its parameter
    ``name`` (or None)."""
    from trainguard.lint.branches import param_env

    func = script.enclosing_function(at)
    if func is None:
        return None
    a = func.args
    if name not in {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]}:
        return None
    return param_env(script, func).get(name)


def _local_value(script: Any, at: ast.AST, name: str, depth: int) -> ast.expr | None:
    """What a local name of the function around ``at`` holds when it is assigned once from
    the function's parameters (``d = cfg["data"]`` in ``def train(cfg)``), resolved there, as
    a constant node; None when unknown."""
    if script.enclosing_function(at) is None:
        return None
    value = _single_value(_name_at(at, name))
    if value is None or script.enclosing_function(value) is None:
        return None  # a module constant: const_eval reads it already
    v = resolve(script, value, _depth=depth)
    return None if v is UNKNOWN else ast.Constant(v)


def _imported_value(script: Any, name: str) -> ast.expr | None:
    """What a constant imported by name from another project file holds (``from settings import
    N_ROWS``, :func:`trainguard.lint.project.foreign_constant`), as a constant node; None when
    that file does not fix it."""
    from trainguard.lint.project import foreign_constant

    if name not in script.project_imports or \
            not module_constants_trusted(script.tree, script.source):
        return None  # (a script that runs ``exec`` may rebind what it imported)
    value = foreign_constant(script, name)
    v = const_eval(value) if value is not None else UNKNOWN
    return None if v is UNKNOWN else ast.Constant(v)


def _self_value(script: Any, at: ast.AST, attr: str) -> ast.expr | None:
    """What ``self.attr`` holds when the class sets it once: the value, or for an ``__init__``
    parameter the argument every instantiation passes."""
    from trainguard.lint.callgraph import self_assigned

    cls = script.enclosing_class(at)
    if cls is None:
        return None
    assigned = self_assigned(cls, attr) or [  # a class attribute: ``ckpt_keys = ("model",)``
        s.value for s in cls.body if isinstance(s, ast.Assign) and len(s.targets) == 1 and
        isinstance(s.targets[0], ast.Name) and s.targets[0].id == attr]
    if len(assigned) != 1:
        return None
    value = assigned[0]
    init = next((b for b in cls.body if isinstance(b, ast.FunctionDef) and b.name == "__init__"),
                None)
    if not isinstance(value, ast.Name):
        return _with_init_arguments(script, init, value)
    if init is None or value.id not in {x.arg for x in init.args.args}:
        return value
    arg = next(x for x in init.args.args if x.arg == value.id)
    values = script.graph._param_values(init, arg)  # every instantiation's, and the default
    if values and len({repr(const_eval(v)) for v in values}) == 1 and \
            const_eval(values[0]) is not UNKNOWN:
        return values[0]
    return None


def _with_init_arguments(script: Any, init: ast.AST | None, value: ast.expr) -> ast.expr:
    """``value`` (``argparse.Namespace(**cfg)`` set on ``self`` in ``__init__``) with each
    ``__init__`` parameter it reads replaced by the constant every instantiation passes
    (``DataModule(CONFIG["data"])``); ``value`` itself when a parameter's value is unknown."""
    if init is None or not isinstance(value, ast.Call):
        return value
    params = {x.arg: x for x in init.args.args[1:]}  # type: ignore[attr-defined]
    used = {n.id for n in ast.walk(value) if isinstance(n, ast.Name) and n.id in params}
    if not used:
        return value
    consts: dict[str, Any] = {}
    for name in used:
        values = script.graph._param_values(init, params[name])
        got = [resolve(script, v, _depth=2) for v in values]
        if not got or any(v is UNKNOWN for v in got) or len({repr(v) for v in got}) != 1:
            return value
        consts[name] = got[0]
    return with_constants(value, consts)  # type: ignore[return-value]


def _name_at(at: ast.AST, name: str) -> ast.Name:
    """A ``Name`` that resolves ``name`` from where ``at`` is."""
    node = ast.Name(name, ast.Load())
    node._tg_parent = parent(at) or at  # type: ignore[attr-defined]
    node.lineno = getattr(at, "lineno", 1)  # type: ignore[attr-defined]
    return node


_PLAIN_CALLS = frozenset({"range", "len", "list", "tuple", "float", "int", "sum", "min", "max",
                          "abs", "round", "sorted"})


def built_at_import(name: ast.Name, modules: Any, *, depth: int = 3) -> bool:
    """Whether ``name`` is a module-level value the file builds once, at import, from literals
    and library calls only (``PARENT = torch.tensor([0, 0, 1])``, ``ONEHOT = F.one_hot(PARENT,
    2).float()``; ``modules``: the names the file imports modules as): a tensor made so carries
    no graph. Never a value made learnable (``requires_grad``, ``nn.Parameter``), nor a name a
    function rebinds (``global``) or the file rewrites behind the parser's back."""
    value = _single_value(name)
    assign = parent(value) if value is not None else None
    if depth == 0 or not isinstance(assign, ast.Assign) or \
            not isinstance(parent(assign), ast.Module):
        return False
    if name.id in _rebound(parent(assign)):
        return False
    for n in ast.walk(value):
        if isinstance(n, ast.keyword) and n.arg == "requires_grad" or \
                isinstance(n, ast.Attribute) and n.attr in ("Parameter", "requires_grad_"):
            return False
        if isinstance(n, ast.Name) and n.id not in modules and n.id not in _PLAIN_CALLS and \
                not built_at_import(n, modules, depth=depth - 1):
            return False
    return True


def _rebound(tree: ast.AST) -> set[str]:
    """Module-level names a function rebinds (``global``) or the file makes learnable
    (``W.requires_grad_()``, ``W.requires_grad = True``), once per file."""
    names = getattr(tree, "_tg_rebound", None)
    if names is None:
        names = set()
        for n in ast.walk(tree):
            if isinstance(n, ast.Global):
                names.update(n.names)
            elif isinstance(n, ast.Attribute) and n.attr.startswith("requires_grad") and \
                    isinstance(n.value, ast.Name):
                names.add(n.value.id)
        tree._tg_rebound = names  # type: ignore[attr-defined]
    return names


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _single_value(name: ast.Name) -> ast.expr | None:
    """The one value ``name`` is ever given in its function, else at module level."""
    scope = parent(name)
    while scope is not None and not isinstance(scope, (*SCOPES, ast.Module)):
        scope = parent(scope)
    while scope is not None:
        table = _assignment_table(scope)
        if name.id in table:
            values = table[name.id]
            return values[0] if len(values) == 1 else None
        if isinstance(scope, ast.Module):
            return None
        scope = parent(scope)
        while scope is not None and not isinstance(scope, (*SCOPES, ast.Module)):
            scope = parent(scope)
    return None


def _assignment_table(scope: ast.AST) -> dict[str, list[ast.expr | None]]:
    """name -> every value bound to it in ``scope`` (None for a binding that is not a plain
    assignment: a loop target, a parameter, ``+=``, an in-place method like ``.append``)."""
    table = getattr(scope, "_tg_const_table", None)
    if table is not None:
        return table
    table = {}
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = scope.args
        for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
            if arg is not None:
                table.setdefault(arg.arg, []).append(None)
    stack = list(children(scope))
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    table.setdefault(t.id, []).append(n.value)
                elif isinstance(t, (ast.Tuple, ast.List)) and \
                        isinstance(n.value, (ast.Tuple, ast.List)) and \
                        len(t.elts) == len(n.value.elts) and \
                        all(isinstance(e, ast.Name) for e in t.elts):
                    for e, v in zip(t.elts, n.value.elts):  # N_TRAIN, N_VAL = 97, 23
                        table.setdefault(e.id, []).append(v)  # type: ignore[union-attr]
                else:
                    for sub in ast.walk(t):
                        if isinstance(sub, ast.Name):
                            table.setdefault(sub.id, []).append(None)
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            table.setdefault(n.target.id, []).append(n.value)
        elif isinstance(n, (ast.AugAssign, ast.For, ast.AsyncFor, ast.comprehension)):
            for sub in ast.walk(n.target):
                if isinstance(sub, ast.Name):
                    table.setdefault(sub.id, []).append(None)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            for name in n.names:
                table.setdefault(name, []).append(None)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                isinstance(n.func.value, ast.Name) and n.func.attr in (
                    "append", "extend", "update", "pop", "insert", "setdefault", "clear"):
            table.setdefault(n.func.value.id, []).append(None)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            table.setdefault(n.name, []).append(None)
        if not isinstance(n, SCOPES):
            stack.extend(children(n))
    scope._tg_const_table = table  # type: ignore[attr-defined]
    return table
