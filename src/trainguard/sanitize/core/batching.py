"""Hand-written batching loops whose last batch holds one sample.

A script that slices its own batches (``for i in range(0, len(x), bs): xb = x[i:i + bs]``, in the
training loop or in a generator that yields them) has no ``drop_last``: when the number of samples
leaves a remainder of one, the epoch's last batch is a single sample. On PyTorch's batch-of-one
error, :func:`partial_range_loop` looks at the user frames on the stack and at the suspended
generators of user code for a ``for`` over ``range(start, stop, step)`` (or a ``while start <
stop:`` that advances ``start += step``) around the line each one is at, reads ``start``, ``stop``
and ``step`` from that frame (names, attributes, ``len()``, ``.shape[k]`` and integer arithmetic;
nothing else is evaluated) and returns the first loop whose last chunk, ``stop - start`` modulo
``step``, is one sample and whose loop variable is at that chunk now (the batch that failed is the
one it sliced); or a ``for`` over a list of batches made beforehand whose last, current one
holds one sample (:func:`_listed_batches`: reported at the statement that made it). Only called
on that error: it parses the files of those frames and scans the heap
once (``bounds.live_objects``).
"""

from __future__ import annotations

import ast
import inspect
import operator
import sys
import types
from collections.abc import Iterator
from typing import Any

from trainguard.sanitize.core.bounds import live_objects, parse_file
from trainguard.sanitize.core.frames import Location, is_user_code, read_path
from trainguard.sanitize.core.source import function_node, last_assigned

__all__ = ["partial_range_loop"]

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.FloorDiv: operator.floordiv}
_FRAMES = 8  # user frames looked at, innermost first


def partial_range_loop() -> tuple[str, Location] | None:
    """``(description, where)`` of a batching loop that leaves a last batch of one sample
    (``where``: the ``for`` line), or None."""
    for frame in _candidates():
        found = _range_loop(frame)
        if found is not None:
            return found
    return None


def _candidates() -> Iterator[types.FrameType]:
    """The user frames on the stack, innermost first; then the frames of suspended generators
    of the same modules (a generator of another run, left suspended, is not this batch's)."""
    frame: types.FrameType | None = sys._getframe(1)
    seen = 0
    modules = []
    while frame is not None and seen < _FRAMES:
        if is_user_code(frame.f_code):
            seen += 1
            modules.append(frame.f_globals)
            yield frame
        frame = frame.f_back
    for gen in live_objects(lambda o: type(o) is types.GeneratorType):
        held = gen.gi_frame
        if held is not None and gen.gi_suspended and is_user_code(held.f_code) and \
                any(held.f_globals is g for g in modules):
            yield held


def _range_loop(frame: types.FrameType) -> tuple[str, Location] | None:
    path, line = frame.f_code.co_filename, frame.f_lineno
    tree = parse_file(path)
    if tree is None:
        return None
    found = _while_loop(tree, frame)
    if found is not None:
        return found
    loops = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.AsyncFor)) and
             n.lineno <= line <= (n.end_lineno or n.lineno) and _range_call(n.iter)]
    for loop in sorted(loops, key=lambda n: -n.lineno):  # the innermost first
        args = loop.iter.args  # type: ignore[attr-defined]
        values = [_value(a, frame) for a in args]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            continue
        start, stop, step = values
        at = _value(loop.target, frame) if isinstance(loop.target, ast.Name) else None
        # the loop is at its last chunk now: the batch that failed is the one it sliced
        if step > 1 and stop > start and (stop - start) % step == 1 and at == stop - 1:
            text = ast.unparse(loop.iter)
            return (f"batching loop `for {ast.unparse(loop.target)} in {text}` "
                    f"({stop - start} samples in steps of {step})",
                    (path, loop.lineno, loop.col_offset + 1))
    return _listed_batches(tree, frame)


def _listed_batches(tree: ast.AST, frame: types.FrameType) -> tuple[str, Location] | None:
    """A ``for`` around ``frame``'s line over a name that holds the batches made beforehand, a
    list or tuple (``batches = [perm[i:i + bs] for i in range(0, n, bs)]``, ``perm.split(bs)``)
    whose last batch is one sample while the ones before are larger, and the loop at that last
    one now (its variable is that very object): the statement that made the list, the last
    assignment of that name above the loop in the function, is where the remainder is kept."""
    line = frame.f_lineno
    loops = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.AsyncFor)) and
             n.lineno <= line <= (n.end_lineno or n.lineno) and isinstance(n.iter, ast.Name)
             and isinstance(n.target, ast.Name)]
    for loop in sorted(loops, key=lambda n: -n.lineno):  # the innermost first
        held, at = _value(loop.iter, frame), _value(loop.target, frame)
        if not isinstance(held, (list, tuple)) or len(held) < 2 or held[-1] is not at or \
                not all(hasattr(type(b), "__len__") for b in (held[0], at)) or \
                not (len(at) == 1 < len(held[0])):
            continue
        scope = function_node(frame.f_code)
        made = last_assigned(scope, loop.iter.id, loop.lineno - 1, (ast.expr,)) \
            if scope is not None else None
        if made is None:
            continue
        return (f"batching loop over `{loop.iter.id} = {ast.unparse(made)}` ({len(held)} "
                f"batches of {len(held[0])} samples, the last of one)",
                (frame.f_code.co_filename, made.lineno, made.col_offset + 1))
    return None


def _while_loop(tree: ast.AST, frame: types.FrameType) -> tuple[str, Location] | None:
    """The innermost ``while start < stop:`` around ``frame``'s line whose body advances
    ``start += step`` once, at its last chunk now and that chunk one sample: ``start`` is the
    chunk's first index before that statement runs, the next chunk's after it."""
    path, line = frame.f_code.co_filename, frame.f_lineno
    loops = [n for n in ast.walk(tree) if isinstance(n, ast.While) and
             n.lineno < line <= (n.end_lineno or n.lineno)]
    for loop in sorted(loops, key=lambda n: -n.lineno):
        test = loop.test
        if not (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and
                len(test.ops) == 1 and isinstance(test.ops[0], ast.Lt)):
            continue
        name = test.left.id
        steps = [n for stmt in loop.body for n in ast.walk(stmt) if isinstance(n, ast.AugAssign)
                 and isinstance(n.op, ast.Add) and isinstance(n.target, ast.Name)
                 and n.target.id == name]
        if len(steps) != 1:
            continue
        start, stop = _value(test.left, frame), _value(test.comparators[0], frame)
        step = _value(steps[0].value, frame)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, stop, step)):
            continue
        first = start if line < steps[0].lineno else start - step  # the chunk at this line
        if step > 1 and stop - first == 1:
            return (f"batching loop `while {ast.unparse(test)}` (steps of {step} up to "
                    f"{stop}, whose last chunk starts at {first})",
                    (path, loop.lineno, loop.col_offset + 1))
    return None


def _range_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
        node.func.id == "range" and len(node.args) == 3 and not node.keywords


def _value(node: ast.AST, frame: types.FrameType) -> Any:
    """The value of a small expression in ``frame``; None when it holds anything else."""
    try:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.Name, ast.Attribute)):
            found = read_path(frame, node, global_names=True)  # a name, an attribute (self.bs)
            if found is not None or isinstance(node, ast.Name):
                return found
            base = _value(node.value, frame)
            if base is None:
                return None
            if node.attr == "shape":  # a tensor's (or an array's) shape
                return getattr(base, "shape", None)
            static = inspect.getattr_static(base, node.attr, None)
            # a plain class attribute; never a property or other code of the script
            return static if isinstance(static, (int, tuple, list)) else None
        if isinstance(node, ast.Subscript):
            base, key = _value(node.value, frame), _value(node.slice, frame)
            if isinstance(base, (tuple, list)) and isinstance(key, int):
                return base[key]
            return None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "len" and len(node.args) == 1:
            obj = _value(node.args[0], frame)
            return len(obj) if obj is not None and hasattr(type(obj), "__len__") else None
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            a, b = _value(node.left, frame), _value(node.right, frame)
            if isinstance(a, int) and isinstance(b, int):
                return _OPS[type(node.op)](a, b)
    except Exception:  # whatever the script's objects do, this is only a diagnosis
        return None
    return None
