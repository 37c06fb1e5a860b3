"""Generator objects a Dataset holds through other objects: its transforms.

A DataLoader worker gets a copy of the whole dataset object graph, so a ``numpy.random.RandomState``
made in a transform's ``__init__`` is copied into every worker with the same state, whether the
dataset holds the transform directly (``self.transform = RandomCrop()``), in a list
(``self.augment = [Flip(), Rotate()]``) or in a Compose-like object (``Compose([...]).transforms``).
:func:`held_rngs` walks that graph breadth-first from the dataset (bounded in depth, width and
nodes: a dataset holding a million file names costs the first few of them) and returns each
generator with the object that holds it and the access path a ``worker_init_fn`` would use.
"""

from __future__ import annotations

import ast
import sys
import types
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from trainguard.sanitize.core.bounds import DATASET_DEPTH, DATASET_ITEMS, DATASET_NODES
from trainguard.sanitize.core.source import SourceFile, function_node, last_assigned

# constructors of generators a worker would copy (``np.random.RandomState(seed)``, ...)
_RNG_MAKERS = frozenset({"RandomState", "default_rng", "Random", "Generator"})

__all__ = ["Held", "held_rngs", "passed_in", "made_by", "made_in_call", "rng_kind", "code_names",
           "init_body", "callable_names"]

_LEAVES = (str, bytes, int, float, complex, bool, type, types.ModuleType, types.FunctionType,
           types.BuiltinFunctionType, types.MethodType, range, slice)


@dataclass
class Held:
    """A generator object found below the dataset."""

    holder: Any  # the object whose attribute holds it
    attr: str
    kind: str  # "numpy RandomState", ...
    path: str  # how a worker reaches the holder from ``info.dataset``: ``.transform.transforms[1]``
    first: str  # the dataset attribute the path starts with


def held_rngs(dataset: Any, kind_of: Callable[[Any], str | None],
              skip: frozenset[str] = frozenset({"dataset", "datasets"})) -> list[Held]:
    """Generators held by objects below ``dataset`` (not by ``dataset`` itself), breadth-first.

    Args:
        dataset: the dataset object.
        kind_of: the kind of a generator object, or None for anything else.
        skip: dataset attributes not to walk (wrapped datasets are walked on their own).
    """
    found: list[Held] = []
    seen = {id(dataset)}
    queue: deque[tuple[Any, str, str, int]] = deque()
    for name, value in _attributes(dataset):
        if name not in skip:
            queue.append((value, f".{name}", name, 1))
    visited = 0
    while queue and visited < DATASET_NODES:
        obj, path, first, depth = queue.popleft()
        if id(obj) in seen or _is_leaf(obj):
            continue
        seen.add(id(obj))
        visited += 1
        if isinstance(obj, (list, tuple)):
            children = [(f"{path}[{i}]", v) for i, v in enumerate(obj[:DATASET_ITEMS])]
        elif isinstance(obj, dict):
            children = [(f"{path}[{k!r}]", v) for k, v in list(obj.items())[:DATASET_ITEMS]]
        else:
            children = []
            for name, value in _attributes(obj):
                kind = kind_of(value)
                if kind is not None:
                    found.append(Held(obj, name, kind, path, first))
                elif name == "_modules" and isinstance(value, dict):  # an nn.Module's children
                    children += [(f"{path}[{k}]" if str(k).isdigit() else f"{path}.{k}", v)
                                 for k, v in value.items()]
                elif not name.startswith("__"):
                    children.append((f"{path}.{name}", value))
        if depth < DATASET_DEPTH:
            queue.extend((v, p, first, depth + 1) for p, v in children)
    return found


def _attributes(obj: Any) -> list[tuple[str, Any]]:
    try:
        return list(vars(obj).items())
    except TypeError:  # no __dict__ (slots, C objects)
        return []


def _is_leaf(obj: Any) -> bool:
    if obj is None or isinstance(obj, _LEAVES):
        return True
    module = type(obj).__module__ or ""
    # tensors, arrays and frames hold numbers, not generators
    return module.startswith(("torch._", "numpy", "pandas", "PIL")) or type(obj).__name__ in (
        "Tensor", "Parameter", "ndarray")


def passed_in(where: Any, attr: str) -> bool:
    """Whether the store of ``self.<attr>`` at ``where`` (``(path, line, col)``) only keeps a
    value given to it (``self.random_state = random_state``, ``self.rs, self.p = rs, p``): the
    generator was made elsewhere. False when the value is made there, or the source is unknown."""
    file = SourceFile.load(where[0]) if where else None
    if file is None:
        return False
    for node in file.parents:
        if isinstance(node, ast.Assign) and node.lineno <= where[1] <= (node.end_lineno or 0):
            for target in node.targets:
                value = _paired(target, node.value, attr)
                if value is not None:
                    return isinstance(value, ast.Name)
    return False


def _paired(target: ast.AST, value: ast.AST, attr: str) -> ast.AST | None:
    """The value assigned to ``self.<attr>`` in ``target = value`` (tuples paired by position)."""
    if isinstance(target, ast.Attribute) and target.attr == attr and isinstance(
            target.value, ast.Name) and target.value.id == "self":
        return value
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
            and len(target.elts) == len(value.elts):
        for t, v in zip(target.elts, value.elts):
            found = _paired(t, v, attr)
            if found is not None:
                return found
    return None


def made_in_call(where: Any) -> Any:
    """Where a generator handed to a constructor in the statement at ``where`` was made: the
    generator's constructor written as an argument there (``self.aug = Aug(rng=RandomState(s))``)
    or the last assignment of a name passed there from one in the same function (``rs =
    RandomState(s)``, then ``Aug(rng=rs)``); None when the statement passes no such generator."""
    file = SourceFile.load(where[0]) if where else None
    stmt = next((n for n in file.parents if isinstance(n, ast.Assign) and
                 n.lineno <= where[1] <= (n.end_lineno or 0)), None) if file is not None else None
    if stmt is None or not isinstance(stmt.value, ast.Call):
        return None
    args = [*stmt.value.args, *(k.value for k in stmt.value.keywords)]
    for arg in args:
        made = next((c for c in ast.walk(arg) if isinstance(c, ast.Call) and _maker(c)), None)
        if made is None and isinstance(arg, ast.Name):
            value = last_assigned(file.scope(stmt), arg.id, stmt.lineno, (ast.Call,))
            made = value if value is not None and _maker(value) else None
        if made is not None:
            return (where[0], made.lineno, made.col_offset + 1)
    return None


def _maker(call: ast.Call) -> bool:
    func = call.func
    return (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) \
        in _RNG_MAKERS


def made_by(dataset: Any, generator: Any) -> list[str]:
    """The dataset's own attributes that hold ``generator`` (the same object): where a
    generator handed to a transform may have been made."""
    return [name for name, value in _attributes(dataset) if value is generator]


def rng_kind(value: Any) -> str | None:
    """The kind of a generator object that a worker would copy, or None (PyTorch reseeds the
    global instances in every worker)."""
    import random

    import torch

    if isinstance(value, random.Random):
        if isinstance(value, random.SystemRandom) or value is getattr(random, "_inst", None):
            return None
        return "random.Random"
    if isinstance(value, torch.Generator):
        return None if value is torch.default_generator else "torch.Generator"
    np = sys.modules.get("numpy")
    if np is not None:
        if isinstance(value, np.random.Generator):
            return "numpy Generator"
        if isinstance(value, np.random.RandomState):
            return None if value is getattr(np.random.mtrand, "_rand", None) else \
                "numpy RandomState"
    return None


def code_names(code: types.CodeType) -> list[str]:
    """The global and attribute names ``code`` loads, with those of the code nested in it: a
    comprehension's body is a code object of its own before Python 3.12 (PEP 709), so
    ``[p + self.rng.normal() for p in pts]`` reads ``rng`` only there."""
    return [*code.co_names, *(name for const in code.co_consts
                              if isinstance(const, types.CodeType) for name in code_names(const))]


def init_body(fn: Any) -> tuple[str, int, int] | None:
    """``(path, line, column)`` of the body of a user's ``worker_init_fn`` (through
    ``functools.partial``) that does nothing (``pass``, ``...``, a docstring, a bare
    ``return``): a placeholder left where each worker's reseed goes. None for a function that
    runs code (it reseeds other generators: the store stays the line to change), a lambda, a
    library function or no function."""
    fn = getattr(fn, "func", fn)
    if not isinstance(fn, types.FunctionType) or fn.__name__ == "<lambda>":
        return None
    node = function_node(fn.__code__)
    body = getattr(node, "body", None) if isinstance(node, ast.FunctionDef) else None
    if not body or not all(_idle(statement) for statement in body):
        return None
    return (fn.__code__.co_filename, body[-1].lineno, body[-1].col_offset + 1)


def _idle(statement: ast.stmt) -> bool:
    """Whether a statement does nothing: ``pass``, a constant (``...``, a docstring), ``return``."""
    if isinstance(statement, ast.Return):
        return statement.value is None or isinstance(statement.value, ast.Constant)
    return isinstance(statement, ast.Pass) or isinstance(statement, ast.Expr) and isinstance(
        statement.value, ast.Constant)


def callable_names(fn: Any) -> set[str] | None:
    """Names a ``worker_init_fn`` (and the functions of the user's module it calls) loads or
    stores; None when there is none. A callable whose code cannot be read counts as touching
    everything."""
    if fn is None:
        return None
    fn = getattr(fn, "func", fn)  # functools.partial
    if not isinstance(fn, types.FunctionType):
        fn = getattr(getattr(fn, "__call__", None), "__func__", None)
    if not isinstance(fn, types.FunctionType):
        return {"get_worker_info", "dataset"}
    names: set[str] = set()
    pending: list[tuple[types.CodeType, dict]] = [(fn.__code__, fn.__globals__)]
    seen: set[types.CodeType] = set()
    while pending:
        code, scope = pending.pop()
        if code in seen or len(seen) > 64:
            continue
        seen.add(code)
        names.update(code.co_names)
        pending.extend((c, scope) for c in code.co_consts if isinstance(c, types.CodeType))
        for name in code.co_names:
            called = scope.get(name)
            if isinstance(called, types.FunctionType) and called.__globals__ is scope:
                pending.append((called.__code__, scope))
    return names
