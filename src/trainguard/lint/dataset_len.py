"""How many samples a ``Dataset`` class of the file holds, from what its constructor stores.

``def __len__(self): return len(self.labels)`` (or ``self.labels.shape[0]``,
``self.labels.size(0)``, ``self.n``) holds as many samples as the value ``__init__`` assigns
to ``self.labels``, with ``__init__``'s parameters bound to the instantiation's arguments:
``Interactions(n_rows=1025)`` storing ``torch.randint(0, k, (n_rows,))`` holds 1025; a list
``__init__`` starts empty and appends to once per pass of ``for _ in range(n_pairs)``, or a
``[... for i in range(n)]``, holds ``n``. Anything
the file does not fix (an attribute assigned twice or outside ``__init__``, a length computed
another way) is unknown.
"""

from __future__ import annotations

import ast
from typing import Any

from trainguard.lint.astutil import assigned_pairs, dotted, parent, self_attr, walk_local
from trainguard.lint.consts import UNKNOWN, const_eval, resolve
from trainguard.lint.script import Script

__all__ = ["class_length", "own_attribute"]


def class_length(script: Script, call: ast.Call, depth: int) -> Any:
    """The samples of the instance ``call`` builds of a same-file ``Dataset`` class."""
    from trainguard.lint.callgraph import bind_arguments, defaults
    from trainguard.lint.shapes import samples

    cls, owner = _dataset_class(script, call)
    if cls is None:
        return UNKNOWN
    length = _method(cls, "__len__")
    if length is None:
        return UNKNOWN
    rets = [r for r in walk_local(length) if isinstance(r, ast.Return)]
    if len(rets) != 1 or rets[0].value is None:
        return UNKNOWN
    v = const_eval(rets[0].value)
    if v is not UNKNOWN:
        return v if isinstance(v, int) and not isinstance(v, bool) else UNKNOWN
    attr, count = _length_of(rets[0].value)
    init = _method(cls, "__init__")
    if attr is None or init is None:
        return UNKNOWN
    value = _assigned_once(init, attr)
    if value is None:
        return UNKNOWN
    names = [a.arg for a in init.args.posonlyargs + init.args.args][1:]
    env: dict[str, ast.expr] = defaults(init)
    if any(isinstance(a, ast.Starred) for a in call.args) or \
            any(k.arg is None for k in call.keywords):
        return UNKNOWN
    for name, arg in bind_arguments(names, call).items():
        v = resolve(script, arg)  # Table(s.rows): the settings' value
        env[name] = ast.Constant(v) if isinstance(v, (int, float)) else arg
    if count:  # self.n = n_rows
        n = const_eval(value, env=env)
        return n if isinstance(n, int) and not isinstance(n, bool) else UNKNOWN
    if isinstance(value, ast.List) and not value.elts:  # self.items = [] then appended to
        loop = _appending_loop(init, attr)
        return _range_length(owner, loop.iter, env, depth) if loop is not None else UNKNOWN
    if isinstance(value, ast.ListComp):  # [make(i) for i in range(n)]
        gen = value.generators
        if len(gen) == 1 and not gen[0].ifs:
            return _range_length(owner, gen[0].iter, env, depth)
        return UNKNOWN
    return samples(owner, value, env, depth=depth)


def _dataset_class(script: Script, call: ast.Call) -> tuple[ast.ClassDef | None, Script]:
    """The class ``call`` builds and the file that defines it: this one, or another file of
    the project the script imports it from (``from helpers import Utterances``)."""
    from trainguard.lint.project import foreign_definition

    name = dotted(call.func) or ""
    cls = script.classes.get(name)
    if cls is not None or not name:
        return cls, script
    ref = foreign_definition(script, name)
    node = getattr(ref, "node", None)
    return (node, ref.script) if isinstance(node, ast.ClassDef) else (None, script)


def _appending_loop(init: ast.AST, attr: str) -> ast.For | None:
    """The ``for`` loop of ``__init__`` whose passes each append once to the list
    ``self.<attr>`` it starts empty: one ``self.<attr>.append(...)`` statement directly in one
    loop (no ``if`` or ``try`` around it inside the loop, no ``break``/``continue``), and
    nothing else that changes the list. None otherwise."""
    uses = [n for n in walk_local(init) if isinstance(n, ast.Attribute) and self_attr(n) == attr]
    calls = [parent(u) for u in uses]
    appends = [c for c in calls if isinstance(c, ast.Attribute) and c.attr == "append"]
    if len(appends) != 1 or any(isinstance(c, ast.Attribute) and c.attr in _GROWS
                                for c in calls if c is not appends[0]):
        return None
    stmt = parent(parent(appends[0]))
    loop = parent(stmt) if isinstance(stmt, ast.Expr) else None
    if not isinstance(loop, ast.For) or stmt not in loop.body or loop.orelse or \
            any(isinstance(n, (ast.Break, ast.Continue)) for n in walk_local(loop)) or \
            isinstance(parent(loop), (ast.For, ast.While, ast.If, ast.Try)):
        return None
    return loop


_GROWS = {"append", "extend", "insert", "pop", "remove", "clear"}


def _range_length(script: Script, expr: ast.expr, env: dict[str, ast.expr], depth: int) -> Any:
    """The length of ``range(...)`` (:func:`trainguard.lint.shapes.samples` computes it); only
    ``range`` iterables count here."""
    from trainguard.lint.shapes import samples

    if isinstance(expr, ast.Call) and dotted(expr.func) == "range":
        return samples(script, expr, env, depth=depth)
    return UNKNOWN


def own_attribute(attr: ast.Attribute) -> ast.expr | None:
    """``self.x`` read in a method: the one value the method assigns to ``self.x`` above the
    read (``self.users = torch.randint(...)`` then ``self.users.float()``)."""
    if not (isinstance(attr.value, ast.Name) and attr.value.id == "self"):
        return None
    func = attr
    while func is not None and not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        func = parent(func)
    if func is None:
        return None
    value = _assigned_once(func, attr.attr)
    if value is None or (value.lineno, value.col_offset) >= (attr.lineno, attr.col_offset):
        return None
    return value


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((b for b in cls.body if isinstance(b, ast.FunctionDef) and b.name == name),
                None)


def _length_of(expr: ast.expr) -> tuple[str | None, bool]:
    """(attribute, whether it is a count): ``len(self.a)``, ``self.a.shape[0]``,
    ``self.a.size(0)`` -> ("a", False); ``self.n`` -> ("n", True)."""
    if isinstance(expr, ast.Call) and dotted(expr.func) == "len" and len(expr.args) == 1:
        return self_attr(expr.args[0]), False
    if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Attribute) and \
            expr.value.attr == "shape" and const_eval(expr.slice) == 0:
        return self_attr(expr.value.value), False
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and \
            expr.func.attr == "size" and len(expr.args) == 1 and const_eval(expr.args[0]) == 0:
        return self_attr(expr.func.value), False
    return self_attr(expr), True


def _assigned_once(func: ast.AST, attr: str) -> ast.expr | None:
    """The value of the one statement of ``func`` that binds ``self.<attr>``, else None."""
    found = []
    for node in walk_local(func):
        if isinstance(node, ast.Assign):  # self.images, self.masks = [], []: element-wise
            pairs = assigned_pairs(node.targets, node.value)
        elif isinstance(node, ast.AnnAssign):
            pairs = [(node.target, node.value)]
        elif isinstance(node, ast.AugAssign):
            pairs = [(node.target, None)]
        else:
            continue
        for t, value in pairs:
            for sub in ast.walk(t):
                if self_attr(sub) == attr:
                    found.append(value if t is sub else None)
    return found[0] if len(found) == 1 else None
