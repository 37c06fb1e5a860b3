"""``args.x`` of an ``argparse`` namespace, by its option's default (the run as written), for
:func:`trainguard.lint.consts.resolve`."""

from __future__ import annotations

import ast
from typing import Any

from trainguard.lint.consts import _name_at, _single_value, const_eval
from trainguard.lint.astutil import parent

__all__ = ["argparse_default"]


def argparse_default(at: ast.AST, namespace: str, attr: str,
                      script: Any = None) -> ast.expr | None:
    """The ``default=`` of the one ``add_argument`` whose destination is ``attr``, when
    ``namespace`` holds ``parser.parse_args()``: assigned once from it, from a function of the
    file that returns it (``args = get_args()``), or a parameter every call fills so
    (``main(get_args([]))``). None when the option is absent, repeated, required, or a flag
    without a literal default."""
    holder = _name_at(at, namespace)
    value = _single_value(holder)
    if value is None and script is not None:
        value = _namespace_argument(script, at, namespace)
    elif isinstance(value, ast.Call) and script is not None:
        value = _returned_namespace(script, value)
    if isinstance(value, ast.Subscript):  # args = parser.parse_known_args()[0]
        value = value.value
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and
            value.func.attr in ("parse_args", "parse_known_args")):
        return None
    root = at
    while parent(root) is not None:
        root = parent(root)  # type: ignore[assignment]
    table = getattr(root, "_tg_argparse", None)
    if table is None:
        table = {}
        for n in ast.walk(root):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                    n.func.attr == "add_argument" and n.args:
                dest = _argparse_dest(n)
                if dest is not None:
                    table.setdefault(dest, []).append(n)
        root._tg_argparse = table  # type: ignore[attr-defined]
    calls = table.get(attr, [])
    if len(calls) != 1:
        return None
    call = calls[0]
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    if "required" in keywords and const_eval(keywords["required"]) is not False:
        return None
    if "default" in keywords:
        return keywords["default"]
    action = const_eval(keywords.get("action"))
    if action == "store_true":
        return ast.Constant(False)
    if action == "store_false":
        return ast.Constant(True)
    return None


def _namespace_argument(script: Any, at: ast.AST, name: str) -> ast.expr | None:
    """The ``parse_args()`` call that every call of the function around ``at`` passes for its
    parameter ``name`` (``main(get_args([]))``, ``main(parser.parse_args())``, or a name
    assigned once from either: ``args = get_args()`` then ``train(args)``), else None."""
    from trainguard.lint.callgraph import bind_arguments

    func = script.enclosing_function(at)
    if func is None:
        return None
    names = [x.arg for x in [*func.args.posonlyargs, *func.args.args]]
    if name not in names + [x.arg for x in func.args.kwonlyargs] or name == "self":
        return None
    if names and names[0] == "self":
        names = names[1:]
    found = None
    for site in script.call_sites(func)[:8]:
        given = bind_arguments(names, site).get(name)
        if isinstance(given, ast.Name):  # args = get_args() ... train(args)
            given = _single_value(given)
        value = _returned_namespace(script, given) if isinstance(given, ast.Call) else None
        if value is None:
            return None
        found = found or value
    return found


def _returned_namespace(script: Any, call: ast.Call) -> ast.expr | None:
    """``call`` itself when it is ``parse_args()``; for a call of a function of the file, what
    its one ``return`` gives when that is ``parse_args()`` (or a name assigned once from it)."""
    if _parses(call):
        return call
    targets = [t for t in script.targets(call) if t.script is script and not t.instance]
    if len(targets) != 1:
        return None
    rets = [n.value for n in ast.walk(targets[0].func) if isinstance(n, ast.Return)]
    if len(rets) != 1 or rets[0] is None:
        return None
    value = rets[0]
    if isinstance(value, ast.Name):
        name = value.id
        value = _single_value(value)
        if value is None:  # opts, _ = parser.parse_known_args()
            value = next((n.value for n in ast.walk(targets[0].func)
                          if isinstance(n, ast.Assign) and len(n.targets) == 1 and
                          isinstance(n.targets[0], ast.Tuple) and n.targets[0].elts and
                          isinstance(n.targets[0].elts[0], ast.Name) and
                          n.targets[0].elts[0].id == name and
                          isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Attribute)
                          and n.value.func.attr == "parse_known_args"), None)
    return value if _parses(value) else None


def _parses(value: ast.AST | None) -> bool:
    if isinstance(value, ast.Subscript):  # parser.parse_known_args()[0]
        value = value.value
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
        value.func.attr in ("parse_args", "parse_known_args")


def _argparse_dest(call: ast.Call) -> str | None:
    for k in call.keywords:
        if k.arg == "dest":
            v = const_eval(k.value)
            return v if isinstance(v, str) else None
    names = [const_eval(a) for a in call.args]
    if not all(isinstance(n, str) for n in names):
        return None
    long = [n for n in names if n.startswith("--")]
    name = long[0] if long else names[0]
    return name.lstrip("-").replace("-", "_") or None
