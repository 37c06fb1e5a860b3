"""An epsilon guard whose value is 0: where that 0 was set, for the op it failed to keep finite.

A division written with a guard term (``num / (energy + self.eps)``) makes NaN/Inf like an
unguarded one when the guard is 0: the op's line reads right, and the line to change is where the
0 came from, the constructor's default (``def __init__(self, eps=0.0)``) or the keyword of the
one construction that passed it (``SiSdrLoss(eps=0)``; from a dict literal,
``eps=CONFIG["eps"]``: that entry). :func:`zero_guard` is asked with the first op that made a
non-finite value and its line; it reads the guard from the live module whose method holds that
line (an attribute of the instance, a plain number), never running user code.

Cost: at most one parse of the files involved (cached) and a walk of one statement and one
class's ``__init__``, once per finding.
"""

from __future__ import annotations

import ast
from typing import Any

from trainguard.sanitize.core.cuts import self_stores
from trainguard.sanitize.core.frames import Location, short_location
from trainguard.sanitize.core.source import SourceFile, function_at, last_assigned, parse_file

__all__ = ["zero_guard"]

_DIVISIONS = frozenset(("div", "true_divide", "divide", "reciprocal", "rsqrt"))
_MODULES = 256  # submodules of the watched models looked at


def zero_guard(at: Location, op: str, models: list[Any]) -> tuple[Location, str] | None:
    """``(where the guard was set to 0, clause)`` when the op ``op`` that made NaN/Inf from
    finite inputs at line ``at`` is a division (finite inputs give NaN/Inf there only by a 0
    divisor) and the line divides by a sum with a ``self.<attr>`` term that is 0 on every
    module of ``models`` whose class defines the method holding ``at``; None otherwise (a log
    of a negative value is no guard's fault; a guard that is not 0, a tensor, a property, a
    value set elsewhere than by ``__init__`` from its parameter, a class built more than once
    or nowhere in the file, an unguarded division on the line)."""
    if "div" not in op and op not in _DIVISIONS:
        return None
    file = SourceFile.load(at[0])
    func = function_at(at[0], at[1]) if file is not None else None
    klass = file.parents.get(func) if isinstance(func, ast.FunctionDef) else None
    if not isinstance(klass, ast.ClassDef):
        return None
    owners = [m for model in models for m in list(model.modules())[:_MODULES]
              if type(m).__name__ == klass.name and _defines(type(m), func.name, at[0])]
    for attr in _guards(func, at[1]):
        values = [vars(m).get(attr) for m in owners]
        if not values or not all(type(v) in (int, float) and v == 0 for v in values):
            continue
        origin = _origin(type(owners[0]), attr, klass.name, at[0])
        if origin is not None:
            return origin, (f"; its guard `self.{attr}` is 0 (set at {short_location(origin)}), "
                            "so it keeps nothing away from the singular point: give it a small "
                            "positive value (1e-8)")
    return None


def _defines(cls: type, name: str, path: str) -> bool:
    code = getattr(getattr(cls, name, None), "__code__", None)
    return code is not None and code.co_filename == path


def _guards(func: ast.AST, line: int) -> list[str]:
    """The ``self.<attr>`` terms added to the divisor of each division written in ``func`` on
    ``line`` (``a / (b + self.eps)``, ``torch.div(a, b + self.eps)``, ``torch.reciprocal(b +
    self.eps)``); none when a division there has no such term (it may be the one at fault)."""
    found: list[str] = []
    for node in ast.walk(func):
        if getattr(node, "lineno", None) != line:
            continue
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            value = node.right
        elif isinstance(node, ast.Call) and node.args and getattr(
                node.func, "attr", getattr(node.func, "id", None)) in _DIVISIONS:
            value = node.args[-1] if len(node.args) == 2 else node.args[0]
        else:
            continue
        terms = []
        while isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
            term, value = value.right, value.left
            if isinstance(term, ast.Attribute) and isinstance(term.value, ast.Name) \
                    and term.value.id == "self":
                terms.append(term.attr)
        if not terms:
            return []
        found += [t for t in terms if t not in found]
    return found


def _origin(cls: type, attr: str, name: str, path: str) -> Location | None:
    """Where ``self.<attr> = <param>`` in ``__init__`` got its 0: the keyword of the one
    construction of ``name`` in ``path`` when it passes the parameter, else the parameter's
    default when that is written 0; None when the parameter is given positionally or the value
    is not a parameter."""
    stores = self_stores(cls, attr, init=True)
    if len(stores) != 1 or not isinstance(stores[0][2], ast.Name):
        return None
    function, _, value = stores[0]
    init = parse_file(function.__code__.co_filename)
    node = next((n for n in ast.walk(init) if isinstance(n, ast.FunctionDef)
                 and n.lineno <= value.lineno <= (n.end_lineno or n.lineno)
                 and n.name == "__init__"), None) if init is not None else None
    if node is None:
        return None
    params = [a.arg for a in node.args.posonlyargs + node.args.args]
    if value.id not in params:
        return None
    index = params.index(value.id) - 1  # (``self`` is not passed)
    tree = parse_file(path)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and getattr(n.func, "id", getattr(n.func, "attr", None)) == name] if tree else []
    if len(calls) != 1 or any(isinstance(a, ast.Starred) for a in calls[0].args) \
            or len(calls[0].args) > index or any(k.arg is None for k in calls[0].keywords):
        return None
    passed = next((k.value for k in calls[0].keywords if k.arg == value.id), None)
    if passed is not None:
        passed = _config_entry(tree, passed) or passed
        return (path, passed.lineno, passed.col_offset + 1)
    defaults = node.args.defaults
    at = len(params) - len(defaults)
    default = defaults[params.index(value.id) - at] if params.index(value.id) >= at else None
    if isinstance(default, ast.Constant) and default.value == 0:
        return (function.__code__.co_filename, default.lineno, default.col_offset + 1)
    return None


def _config_entry(tree: ast.AST, passed: ast.AST) -> ast.AST | None:
    """For ``CONFIG["eps"]`` passed, the value of that key in the dict literal last bound to
    ``CONFIG`` in the file (the config line that holds the 0); None for anything else."""
    if not (isinstance(passed, ast.Subscript) and isinstance(passed.value, ast.Name)
            and isinstance(passed.slice, ast.Constant)):
        return None
    table = last_assigned(tree, passed.value.id, None, (ast.Dict,))
    return next((v for k, v in zip(table.keys, table.values) if isinstance(k, ast.Constant)
                 and k.value == passed.slice.value), None) if table is not None else None
