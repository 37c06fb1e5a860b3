"""A module's cached copy of its own trainable parameters that carries no gradient.

A module that caches a value computed from its parameters on its first call (normalised class
prototypes, weights cast to another dtype) keeps whatever grad mode that call ran under: when the
first call is an evaluation under ``torch.no_grad()`` (a sanity validation before training), the
cache holds a tensor that does not require grad, and every training forward that reuses it builds
no graph to those parameters (NVIDIA/apex#132: "During eval, it's possible to end up caching casted
weights with requires_grad=False").

Proof, read when a backward has already failed for want of a ``grad_fn`` (TG204): a plain
attribute of a module of the model (not a parameter nor a buffer) holds a floating tensor that
does not require grad, and the module's own code stores that attribute from an expression reading
one of the module's parameters that do require grad: computed with grad on, it would require grad.

Cost: on the failed backward only, one pass over the models' modules and, for a candidate, one
parse of its class's source (cached).

Reference: "Locally disabling gradient computation" in
https://pytorch.org/docs/stable/notes/autograd.html.
"""

from __future__ import annotations

import ast
from types import FunctionType
from typing import Any, Iterable

from trainguard.sanitize.core.frames import Location, is_user_code
from trainguard.sanitize.core.source import function_node

__all__ = ["gradless_cache"]

# calls whose result never requires grad (a mask, an index): a cache of them is not the fault
_NO_GRAD_RESULTS = frozenset({"argmax", "argmin", "argsort", "long", "int", "short", "byte",
                              "bool", "item", "tolist", "numpy", "sign", "round", "floor", "ceil"})

_CUT = frozenset({"detach", "detach_", "data"})


def gradless_cache(models: Iterable[Any]) -> tuple[str, str, Location] | None:
    """``(module class, attribute, location of its store)`` of the first cached tensor of the
    ``models`` that is computed from a trainable parameter yet does not require grad; else
    None."""
    import torch

    for model in models:
        for module in model.modules():
            trainable = {n for n, p in module._parameters.items()
                         if p is not None and p.requires_grad}
            if not trainable:
                continue
            for attr, value in list(vars(module).items()):
                if not isinstance(value, torch.Tensor) or value.requires_grad \
                        or not value.is_floating_point():
                    continue
                where = _store(type(module), attr, trainable)
                if where is not None:
                    return type(module).__name__, attr, where
    return None


def _store(cls: type, attr: str, trainable: set[str]) -> Location | None:
    """The user statement of ``cls`` storing ``self.<attr>`` from one of ``self.<trainable>``."""
    for klass in cls.__mro__:
        for function in vars(klass).values():
            if not isinstance(function, FunctionType) or not is_user_code(function.__code__):
                continue
            node = function_node(function.__code__)
            if node is None:
                continue
            for stmt in ast.walk(node):
                if isinstance(stmt, ast.Assign) and any(_is_self(t, attr) for t in stmt.targets) \
                        and _reads_trainable(stmt.value, trainable):
                    return (function.__code__.co_filename, stmt.lineno, stmt.col_offset + 1)
    return None


def _is_self(node: ast.AST, attr: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == attr \
        and isinstance(node.value, ast.Name) and node.value.id == "self"


def _reads_trainable(value: ast.AST, trainable: set[str]) -> bool:
    """Whether ``value`` reads ``self.<p>`` for a trainable ``p`` and nothing in it makes a
    result that never requires grad (a comparison, ``argmax``, an integer cast) or cuts it on
    purpose (``.detach()``, ``.data``)."""
    reads = False
    for node in ast.walk(value):
        if isinstance(node, ast.Compare):
            return False
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in _NO_GRAD_RESULTS:
            return False
        if isinstance(node, ast.Attribute) and node.attr in _CUT:
            return False  # a snapshot taken on purpose (an EMA copy, previous weights)
        if isinstance(node, ast.Attribute) and node.attr in trainable \
                and isinstance(node.value, ast.Name) and node.value.id == "self":
            reads = True
    return reads
