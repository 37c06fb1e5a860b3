"""Where user code makes tensors without saying on which device: the tensor factories
(``torch.zeros(...)``-like calls) given no ``device=``, read from the source of a function.

The legacy type constructors (``torch.FloatTensor(...)``, ``torch.Tensor(...)``) count too: they
always allocate on the CPU and refuse any other ``device=`` (pytorch/pytorch#20122).
"""

from __future__ import annotations

import ast
from types import FunctionType
from typing import Any

from trainguard.sanitize.core.frames import is_user_file
from trainguard.sanitize.core.source import function_node

LEGACY = frozenset({"Tensor", "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor",
                    "LongTensor", "IntTensor", "ShortTensor", "CharTensor", "ByteTensor",
                    "BoolTensor"})
FACTORIES = frozenset({"zeros", "ones", "empty", "full", "rand", "randn", "randint", "arange",
                       "eye", "linspace", "tensor"}) | LEGACY


def assigned_factory(code: Any, names: set[str]) -> tuple[Any, str] | None:
    """``(location, call text)`` of the one ``name = torch.<factory>(..., device=...)``
    statement in the function of ``code`` assigning one of ``names``; None unless exactly one."""
    node = function_node(code)
    found = [n for n in ast.walk(node) if isinstance(n, ast.Assign) and len(n.targets) == 1
             and isinstance(n.targets[0], ast.Name) and n.targets[0].id in names
             and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Attribute)
             and n.value.func.attr in FACTORIES and isinstance(n.value.func.value, ast.Name)
             and n.value.func.value.id == "torch"] if node is not None else []
    if len(found) != 1:
        return None
    call = found[0].value
    return ((code.co_filename, call.lineno, call.col_offset + 1),
            ast.unparse(call.func) + "(..., device=...)")


def factory_methods(classes: list[type]) -> dict[Any, tuple[Any, str]]:
    """``{code: (location, call text)}`` of the first tensor factory without ``device=`` in each
    user-defined method (not ``__init__``) of ``classes`` that has one."""
    calls = {}
    for klass in (k for c in classes for k in c.__mro__):
        for function in vars(klass).values():
            function = getattr(function, "__func__", function)  # (a staticmethod's too)
            if isinstance(function, FunctionType) and function.__name__ != "__init__" \
                    and is_user_file(function.__code__.co_filename):
                node = function_node(function.__code__)
                found = sorted(factories(node) if node is not None else (),
                               key=lambda c: (c.lineno, c.col_offset))
                if found:
                    calls[function.__code__] = (
                        (function.__code__.co_filename, found[0].lineno,
                         found[0].col_offset + 1), ast.unparse(found[0].func) + "(...)")
    return calls


def factories(func: ast.AST) -> list[ast.Call]:
    """``torch.zeros(...)``-like calls in ``func`` given no ``device=`` and not moved in the same
    expression (``torch.zeros(...).to(x)``)."""
    moved = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("to", "cuda", "type_as"):
            moved |= {id(n) for n in ast.walk(node.func.value)}
    return [node for node in ast.walk(func)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in FACTORIES and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "torch" and id(node) not in moved
            and not any(k.arg == "device" for k in node.keywords)]
