"""Which branches a program can take, when its constants and arguments decide them.

A model built from a configuration chooses its layers with tests on the configuration
(``if cfg.get("out_act") == "softmax": layers.append(nn.Softmax(1))``, ``if probs: self.head =
...``). Those tests read a function's parameters, so their value is the value of the argument at
the function's call sites: in its own file, and in the linted file when the function is imported
from another file of the project. A parameter is bound only when every call site found (and the
default, where a site omits it) gives the same constant value; anything else leaves the test
unknown, and an unknown test keeps both branches.

:func:`feasible` says whether a node can run at all by the tests of the ``if``s around it;
:func:`last_elements` gives the possible last elements of a list built step by step
(``layers = [...]``; ``layers.append(x)``; ``layers += [...]``), for ``nn.Sequential(*layers)``.
An ``extend`` with something that is no literal (``layers.extend(block.build(n))``) adds
elements it cannot see (``UNSEEN``): a later ``append`` still decides the last one.
Nothing is run.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from trainguard.lint.astutil import SCOPES, dotted, parent
from trainguard.lint.callgraph import bind_arguments, parameter_default
from trainguard.lint.consts import UNKNOWN, const_eval, truth

if TYPE_CHECKING:
    from trainguard.lint.script import Func, Script

__all__ = ["param_env", "feasible", "last_elements", "EMPTY", "UNSEEN"]

EMPTY: Any = object()  # the list may be empty at that point
UNSEEN: Any = object()  # an element added that the walk cannot see
_MAX_SITES = 8


def param_env(script: "Script", func: "Func", origin: "Script | None" = None,
              _depth: int = 3) -> dict[str, ast.expr]:
    """Parameter name -> the one argument expression every call site of ``func`` agrees on (by
    its constant value). Sites are searched in ``func``'s file and in ``origin`` (the linted
    file, which may import ``func``); ``__init__`` takes its sites from the instantiations. An
    argument that is itself a parameter of the calling function is followed to that function's
    callers (``def train(config): build_model(config)`` ... ``train(CONFIG)``)."""
    memo = script.__dict__.setdefault("_tg_param_env", {})
    k = (id(func), id(origin))
    if k in memo:
        return memo[k]
    memo[k] = {}
    if _depth <= 0:
        return {}
    names = [a.arg for a in [*func.args.posonlyargs, *func.args.args]]
    cls = script.enclosing_class(func)
    if cls is not None and names and not any(dotted(d) == "staticmethod"
                                             for d in func.decorator_list):
        names = names[1:]
    sites = [(script, c) for c in _sites(script, func, cls)]
    if origin is not None and origin is not script:
        sites += [(origin, c) for c in _sites(origin, func, cls)]
    env: dict[str, ast.expr] = {}
    if sites:
        every = [*names, *(a.arg for a in func.args.kwonlyargs)]
        for name in every:
            values = []
            for where, call in sites[:_MAX_SITES]:
                bound = _bind(func, names, call)
                if name in bound:
                    values.append(_through_caller(where, bound[name], origin, _depth))
                else:
                    arg = next(a for a in [*func.args.posonlyargs, *func.args.args,
                                           *func.args.kwonlyargs] if a.arg == name)
                    default = parameter_default(func, arg)
                    if default is None:
                        break
                    values.append(default)
            else:
                seen = {_fingerprint(const_eval(v)) for v in values}
                if len(seen) == 1 and values and const_eval(values[0]) is not UNKNOWN:
                    env[name] = values[0]
                elif len(values) == 1 and _depth > 1 and isinstance(values[0], ast.Attribute):
                    # make_scheduler(opt, args.warmup_epochs): an option's default
                    from trainguard.lint.consts import resolve

                    v = resolve(script, values[0], _depth=1)
                    if isinstance(v, (int, float, str)) and not isinstance(v, bool):
                        env[name] = ast.Constant(v)
    memo[k] = env
    return env


def _bind(func: "Func", names: list[str], call: ast.Call) -> dict[str, ast.expr]:
    """``bind_arguments``, and the arguments after a ``*spread`` when the call must fill every
    parameter: ``Model(*matrix.shape, CONFIG)`` of ``__init__(self, n_users, n_items,
    config)`` (no defaults, no ``*args``, no keywords) binds ``config`` to ``CONFIG``."""
    bound = bind_arguments(names, call)
    star = next((i for i, a in enumerate(call.args) if isinstance(a, ast.Starred)), None)
    a = func.args
    if star is None or a.vararg is not None or a.defaults or call.keywords or \
            any(isinstance(x, ast.Starred) for x in call.args[star + 1:]):
        return bound
    tail = call.args[star + 1:]
    if len(tail) <= len(names):
        bound.update(zip(names[len(names) - len(tail):], tail))
    return bound


def _through_caller(script: "Script", arg: ast.expr, origin: "Script | None",
                    depth: int) -> ast.expr:
    """``arg`` itself, or, when it is a parameter of the function that makes the call, what
    that function's callers pass for it; an entry of one (``cfg["scheduler"]``) is read from
    what they pass, when that is a constant."""
    if isinstance(arg, (ast.Subscript, ast.Attribute)) and const_eval(arg) is UNKNOWN:
        root = arg
        while isinstance(root, (ast.Subscript, ast.Attribute)):
            root = root.value
        if isinstance(root, ast.Name) and root.id != "self":
            passed = _through_caller(script, root, origin, depth)
            if passed is not root:
                value = const_eval(arg, env={root.id: passed})
                literal = _literal(value) if value is not UNKNOWN else None
                if literal is not None:
                    return literal
        return arg
    if not isinstance(arg, ast.Name) or const_eval(arg) is not UNKNOWN:
        return arg
    caller = script.enclosing_function(arg)
    if caller is None:
        return arg
    a = caller.args
    if arg.id not in {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]}:
        return arg
    return param_env(script, caller, origin, depth - 1).get(arg.id, arg)


def _literal(value: Any) -> ast.expr | None:
    """A constant value back as an expression (numbers, strings, lists and dicts of them)."""
    text = repr(value)
    if len(text) > 4000:
        return None
    try:
        node = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return node if const_eval(node) == value else None


def _fingerprint(value: Any) -> str:
    return "?" if value is UNKNOWN else repr(value)


def _sites(script: "Script", func: "Func", cls: ast.ClassDef | None) -> list[ast.Call]:
    """The calls in ``script`` that run ``func`` (its class's instantiations for
    ``__init__``, and a subclass's ``super().__init__(...)``)."""
    graph = script.graph
    if cls is not None and func.name == "__init__":
        out = []
        for call in script.calls:
            if dotted(call.func) is None or dotted(call.func).rsplit(".", 1)[-1] != cls.name:
                continue
            ref = graph.class_named(dotted(call.func))
            if ref is not None and ref.node is cls:
                out.append(call)
        for call in graph._calls_named().get("__init__", ()):  # super().__init__(config)
            f = call.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Call) and \
                    dotted(f.value.func) == "super" and \
                    any(t.func is func for t in graph.targets(call, params=False)):
                out.append(call)
        return out
    return [c for c in graph._calls_named().get(func.name, ())
            if any(t.func is func for t in graph.targets(c, params=False))]


def _none_test(script: "Script", func: "Func", test: ast.expr) -> bool | None:
    """``param is None`` / ``param is not None`` when every call passes an instance for it
    (``make_head(..., activation=nn.Softmax(dim=1))``): an object built there is not None."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and
            isinstance(test.ops[0], (ast.Is, ast.IsNot)) and isinstance(test.left, ast.Name) and
            isinstance(test.comparators[0], ast.Constant) and
            test.comparators[0].value is None):
        return None
    names = [a.arg for a in [*func.args.posonlyargs, *func.args.args]]
    cls = script.enclosing_class(func)
    if cls is not None and names:
        names = names[1:]
    if test.left.id not in names + [a.arg for a in func.args.kwonlyargs]:
        return None
    sites = _sites(script, func, cls)
    if not sites or len(sites) > _MAX_SITES:
        return None
    for call in sites:
        given = _bind(func, names, call).get(test.left.id)
        if not _instance(script, given):
            return None
    return isinstance(test.ops[0], ast.IsNot)


def _instance(script: "Script", expr: ast.expr | None) -> bool:
    """``expr`` builds an object: a ``torch.nn`` module or a class of the project."""
    if not isinstance(expr, ast.Call):
        return False
    q = script.call_qualname(expr) or ""
    last = q.rsplit(".", 1)[-1]
    return q.startswith("torch.nn.") and last[:1].isupper() or \
        script.graph.class_named(dotted(expr.func)) is not None


def test_truth(script: "Script", test: ast.expr, origin: "Script | None") -> bool | None:
    """``truth`` of an ``if`` test, with the parameters of the function around it bound."""
    found = truth(test)
    if found is not None:
        return found
    func = script.enclosing_function(test)
    if func is None:
        return None
    used = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)}
    env = {k: v for k, v in param_env(script, func, origin).items() if k in used}
    if not env:
        return _none_test(script, func, test)
    return truth(test, env=env)


def feasible(script: "Script", node: ast.AST, origin: "Script | None" = None) -> bool:
    """False when an ``if`` around ``node`` (within its function) is decided against it."""
    n = node
    while (p := parent(n)) is not None and not isinstance(p, (*SCOPES, ast.Module)):
        if isinstance(p, (ast.If, ast.IfExp)) and n is not p.test:
            t = test_truth(script, p.test, origin)
            in_body = n in p.body if isinstance(p, ast.If) else n is p.body
            if t is not None and t != in_body:
                return False
        n = p
    return True


def last_elements(script: "Script", name: ast.Name, origin: "Script | None" = None
                  ) -> list[Any] | None:
    """The expressions that may be the last element of list ``name`` where it is read (``EMPTY``
    when it may be empty), by the statements before it in its function: ``name = [a, b]``,
    ``name.append(c)``, ``name.extend([...])``, ``name += [...]``, under ``if``s decided where
    the program fixes them, in loops that may run or not. None when the list is changed in any
    other way or not built in the same function."""
    scope = parent(name)
    while scope is not None and not isinstance(scope, (*SCOPES, ast.Module)):
        scope = parent(scope)
    if scope is None or isinstance(scope, (ast.ClassDef, ast.Lambda)):
        return None
    state: list[Any] | None = None  # None: not built yet
    try:
        state = _walk(script, scope.body, name, state, origin)
    except _Unknown:
        return None
    return state


class _Unknown(Exception):
    """The list is changed in a way the walk does not follow."""


def _walk(script: "Script", body: list[ast.stmt], name: ast.Name, state: Any,
          origin: "Script | None") -> Any:
    target = name.id
    for stmt in body:
        if _contains(stmt, name):
            if isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
                # the read is inside this block: what comes before it there decides
                return _walk_block(script, stmt, name, state, origin, stop=True)
            return state
        if not any(isinstance(n, ast.Name) and n.id == target for n in ast.walk(stmt)):
            continue
        state = _step(script, stmt, name, state, origin)
    return state


def _walk_block(script: "Script", stmt: ast.stmt, name: ast.Name, state: Any,
                origin: "Script | None", stop: bool = False) -> Any:
    if isinstance(stmt, ast.If):
        t = test_truth(script, stmt.test, origin)
        if stop:
            branch = stmt.body if _in(stmt.body, name) else stmt.orelse
            return _walk(script, branch, name, state, origin)
        a = _walk(script, stmt.body, name, state, origin) if t is not False else None
        b = _walk(script, stmt.orelse, name, state, origin) if t is not True else None
        if t is True:
            return a
        if t is False:
            return b
        return _union(a, b)
    if isinstance(stmt, (ast.For, ast.While)):
        if stop:
            return _union(state, _walk(script, stmt.body, name, state, origin))
        return _union(state, _walk(script, stmt.body, name, state, origin))
    if isinstance(stmt, ast.With):
        return _walk(script, stmt.body, name, state, origin)
    if isinstance(stmt, ast.Try):
        return _walk(script, stmt.body, name, state, origin)
    raise _Unknown


def _step(script: "Script", stmt: ast.stmt, name: ast.Name, state: Any,
          origin: "Script | None") -> Any:
    target = name.id
    if isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
        return _walk_block(script, stmt, name, state, origin)
    if isinstance(stmt, ast.AnnAssign) and stmt.value is not None:  # layers: list[...] = []
        stmt = ast.Assign(targets=[stmt.target], value=stmt.value)
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
            isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == target:
        if isinstance(stmt.value, (ast.List, ast.Tuple)):
            if any(isinstance(e, ast.Starred) for e in stmt.value.elts):
                raise _Unknown
            return [stmt.value.elts[-1]] if stmt.value.elts else [EMPTY]
        raise _Unknown
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and \
            stmt.target.id == target and isinstance(stmt.op, ast.Add):
        return _extended(stmt.value, state)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        f = call.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
                f.value.id == target:
            if f.attr == "append" and len(call.args) == 1:
                return [call.args[0]]
            if f.attr == "extend" and len(call.args) == 1:
                return _extended(call.args[0], state)
            raise _Unknown  # insert, pop, remove, sort, reverse ...
        if dotted(f) not in ("print", "len") and any(
                isinstance(a, ast.Name) and a.id == target for a in call.args):
            raise _Unknown  # handed to a function that may change it
        return state
    if isinstance(stmt, ast.Assign) and not any(
            isinstance(n, ast.Name) and n.id == target for t in stmt.targets
            for n in ast.walk(t)):
        return state  # n = len(layers): read, not changed
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return state
    raise _Unknown


def _extended(value: ast.expr, state: Any) -> Any:
    if isinstance(value, (ast.List, ast.Tuple)) and \
            not any(isinstance(e, ast.Starred) for e in value.elts):
        return [value.elts[-1]] if value.elts else state
    if state is None:
        raise _Unknown  # extending a list not built here
    # what it holds is not seen, and it may be empty: the last element is unseen or as before
    return _union(state, [UNSEEN])


def _union(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return a if b is None else b
    out = list(a)
    out += [x for x in b if not any(x is y for y in out)]
    return out


def _contains(stmt: ast.AST, node: ast.AST) -> bool:
    n: ast.AST | None = node
    while n is not None:
        if n is stmt:
            return True
        n = parent(n)
    return False


def _in(body: list[ast.stmt], node: ast.AST) -> bool:
    return any(_contains(s, node) for s in body)
