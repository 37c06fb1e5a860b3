"""Stores of an attribute that the live object's own state skips: ``if self._base_seed is not
None: self._rng = default_rng(...)`` on an object whose ``_base_seed`` is None never replaces
``_rng``, in the main process or in any DataLoader worker that copied the object."""

from __future__ import annotations

import ast
import operator
from types import FunctionType
from typing import Any

from trainguard.sanitize.core.source import function_node

_UNKNOWN = object()
_COMPARE = {ast.Is: operator.is_, ast.IsNot: operator.is_not, ast.Eq: operator.eq,
            ast.NotEq: operator.ne}


def only_skipped_stores(obj: Any, methods: list[FunctionType], attr: str,
                        stored: set[str]) -> bool:
    """Every ``self.<attr> = ...`` in ``methods`` sits in a branch of an ``if`` whose test,
    read on ``obj`` (``self.x``, constants, ``is``/``==``, ``not``, ``and``/``or``), takes the
    other branch; the attributes the test reads are not in ``stored`` (never changed after
    ``__init__`` on the scanned path). False when there is no such store or a test is unknown."""
    found = False
    for method in methods:
        node = function_node(method.__code__)
        if node is None:
            return False
        for skipped in _stores(node, attr, lambda test: _value(test, obj, stored)):
            found = True
            if not skipped:
                return False
    return found


def _stores(node: ast.AST, attr: str, value: Any, skipped: bool = False) -> list[bool]:
    """Per store of ``self.<attr>`` under ``node``: whether an enclosing test skips it."""
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name)
               and t.value.id == "self" for t in targets):
            return [skipped]
    out: list[bool] = []
    if isinstance(node, ast.If):
        test = value(node.test)
        for stmt in node.body:
            out += _stores(stmt, attr, value, skipped or (test is not _UNKNOWN and not test))
        for stmt in node.orelse:
            out += _stores(stmt, attr, value, skipped or (test is not _UNKNOWN and bool(test)))
        return out
    for child in ast.iter_child_nodes(node):
        out += _stores(child, attr, value, skipped)
    return out


def _value(test: ast.AST, obj: Any, stored: set[str]) -> Any:
    """``test`` evaluated on ``obj``; ``_UNKNOWN`` for anything but the forms listed above."""
    if isinstance(test, ast.Constant):
        return test.value
    if isinstance(test, ast.Attribute) and isinstance(test.value, ast.Name) \
            and test.value.id == "self" and test.attr not in stored:
        value = vars(obj).get(test.attr, _UNKNOWN) if hasattr(obj, "__dict__") else _UNKNOWN
        return value if value is None or isinstance(value, (bool, int, float, str)) else _UNKNOWN
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _value(test.operand, obj, stored)
        return _UNKNOWN if inner is _UNKNOWN else not inner
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _COMPARE:
        left, right = _value(test.left, obj, stored), _value(test.comparators[0], obj, stored)
        if _UNKNOWN in (left, right):
            return _UNKNOWN
        return _COMPARE[type(test.ops[0])](left, right)
    if isinstance(test, ast.BoolOp):
        values = [_value(v, obj, stored) for v in test.values]
        want = isinstance(test.op, ast.Or)  # the value that decides it
        if any(v is not _UNKNOWN and bool(v) is want for v in values):
            return want
        return _UNKNOWN if _UNKNOWN in values else not want
    return _UNKNOWN
