"""Finding who keeps a graph alive: a user variable that holds old graphs, and the line that
accumulates into it.

Used when a check has seen that graphs outlive their step: the live user frames are searched for a
variable (a tensor, or a list/tuple/dict of tensors) whose autograd graph carries a node stamped by
the watcher (``node.metadata``, a ``Made``) at an earlier step; then the frame's source is searched for the
statement that accumulates into that variable (``name += ...``, ``name = name + ...``,
``name.append(...)``/``extend``/``insert``, also through ``name[...]``/``name.attr``).
"""

from __future__ import annotations

import ast
import linecache
import sys
from types import CodeType, FrameType
from typing import Any, Callable, Iterator

from trainguard.sanitize.frames import Location, user_frame

__all__ = ["ROOT", "graph_nodes", "node_metadata", "graph_stamps", "find_holder",
           "accumulation_line", "graph_metadata", "tensor_holding", "traceback_user_frames",
           "carried_names"]

ROOT = "trainguard.root"
"""Metadata key on a backward root's ``grad_fn``; the value is a :class:`~trainguard.sanitize.state.Made`."""


def graph_nodes(node: Any, *, limit: int = 20000,
                stop: Callable[[Any], bool] | None = None) -> Iterator[Any]:
    """The autograd nodes of the graph below ``node`` (``node`` first), each once, at most
    ``limit`` of them; the walk does not go past a node for which ``stop(node)`` is true."""
    seen: set[int] = set()
    frontier = [node]
    keep: list[Any] = []  # keep wrappers alive so that ids stay unique during the walk
    while frontier and len(seen) < limit:
        current = frontier.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        keep.append(current)
        yield current
        if stop is not None and stop(current):
            continue
        for nxt, _ in getattr(current, "next_functions", ()):
            if nxt is not None:
                frontier.append(nxt)


def node_metadata(node: Any) -> dict | None:
    """``node.metadata`` (created empty on first access), or None for a node type without it."""
    try:
        return node.metadata
    except (AttributeError, RuntimeError):
        return None


def graph_stamps(node: Any, *, limit: int = 20000) -> list[Any]:
    """The :class:`Made` stamps (outermost outputs and backward roots) in the graph below ``node``
    (at most ``limit`` nodes visited)."""
    from trainguard.sanitize.state import MADE

    found: list[Any] = []
    for current in graph_nodes(node, limit=limit):
        meta = node_metadata(current)
        if meta:
            for key in (MADE, ROOT):
                if key in meta:
                    found.append(meta[key])
    return found


def _tensors_in(value: Any, limit: int = 256) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    items: list[Any] = []
    if isinstance(value, (list, tuple)):
        items = list(value[-limit:])
    elif isinstance(value, dict):
        items = list(value.values())[-limit:]
        nested = [v for v in items if isinstance(v, (list, tuple))]
        items = [v for v in items if isinstance(v, torch.Tensor)] + [t for n in nested
                                                                      for t in n[-limit:]]
    return [t for t in items if isinstance(t, torch.Tensor)]


def find_holder(is_old: Callable[[list[Any]], bool], start: FrameType | None = None
                ) -> tuple[FrameType, str, str] | None:
    """The innermost user frame with a variable whose graphs carry old stamps.

    Args:
        is_old: given the :class:`Made` stamps found under one value, whether they prove it keeps
            old graphs.
        start: the frame to search from (default: the caller).

    Returns:
        ``(frame, variable name, "tensor" | "list")`` or None when no user variable holds them.
    """
    frame = user_frame(start if start is not None else sys._getframe(1))
    while frame is not None:
        names = frame.f_locals
        for name, value in list(names.items()):
            if name.startswith("__"):
                continue
            tensors = _tensors_in(value)
            stamps: list[Any] = []
            for t in tensors:
                if t.grad_fn is not None:
                    stamps += graph_stamps(t.grad_fn, limit=5000 if len(tensors) > 1 else 20000)
            if stamps and is_old(stamps):
                return frame, name, "tensor" if len(tensors) == 1 and tensors[0] is value else "list"
        frame = user_frame(frame.f_back)
    return None


def graphs_released(value: Any, *, nodes: int = 64) -> bool:
    """True when the graphs under ``value`` (a tensor or a container of tensors) were run through
    by a backward that freed their saved tensors (no ``retain_graph``): reading a node's
    ``_saved_*`` attribute then raises "... saved tensors after they have already been freed".
    Only the node objects remain, not the activations. Reads at most ``nodes`` nodes per tensor
    (of up to 4 tensors); never raises."""
    try:
        for tensor in _tensors_in(value)[:4]:
            for node in graph_nodes(tensor.grad_fn, limit=nodes):
                for attr in dir(node):
                    if attr.startswith("_saved_"):
                        try:
                            getattr(node, attr)
                        except RuntimeError as exc:
                            if "freed" in str(exc):
                                return True
    except Exception:  # a diagnosis aid: any surprise means "not known to be released"
        return False
    return False


_ACCUMULATING_METHODS = {"append", "extend", "insert", "add", "appendleft"}


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _parse(filename: str) -> ast.Module | None:
    source = "".join(linecache.getlines(filename))
    if not source:
        return None
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


def accumulation_line(code: CodeType, name: str) -> Location | None:
    """The first statement inside ``code`` that accumulates into variable ``name``."""
    tree = _parse(code.co_filename)
    if tree is None:
        return None
    lines = [line for _, _, line in code.co_lines() if line is not None]
    if code.co_name == "<module>":
        low, high = 1, 10**9
    else:
        low, high = (min(lines), max(lines)) if lines else (code.co_firstlineno, 10**9)
    best: ast.AST | None = None
    for node in ast.walk(tree):
        lineno = getattr(node, "lineno", 0)
        if not low <= lineno <= high:
            continue
        hit = False
        if isinstance(node, ast.AugAssign) and _root_name(node.target) == name:
            hit = True
        elif (isinstance(node, ast.Assign) and isinstance(node.value, ast.BinOp)
              and any(_root_name(t) == name for t in node.targets)
              and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.value))):
            hit = True
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in _ACCUMULATING_METHODS and _root_name(node.func.value) == name
              and node.args):
            hit = True
        if hit and (best is None or (node.lineno, node.col_offset)
                    < (best.lineno, best.col_offset)):  # type: ignore[attr-defined]
            best = node
    if best is None:
        return None
    return (code.co_filename, best.lineno, best.col_offset + 1)  # type: ignore[attr-defined]


def graph_metadata(node: Any, key: str, *, limit: int = 20000) -> list[Any]:
    """The values stored under ``key`` in the metadata of the nodes below ``node``."""
    found: list[Any] = []
    for current in graph_nodes(node, limit=limit):
        meta = node_metadata(current)
        if meta and key in meta:
            found.append(meta[key])
    return found


def tensor_holding(frames: list[FrameType], test: Callable[[Any], bool]) -> tuple[str, Location] | None:
    """A user variable (innermost frame first) holding a tensor for which ``test`` is true."""
    import torch

    for frame in frames:
        for name, value in list(frame.f_locals.items()):
            if isinstance(value, torch.Tensor) and test(value):
                return name, (frame.f_code.co_filename, frame.f_lineno, 1)
            if isinstance(value, (tuple, list)) and len(value) <= 8:
                for item in value:
                    if isinstance(item, torch.Tensor) and test(item):
                        return name, (frame.f_code.co_filename, frame.f_lineno, 1)
    return None


def traceback_user_frames(exc: BaseException) -> list[FrameType]:
    """The user's frames in ``exc``'s traceback, innermost first."""
    from trainguard.sanitize.frames import is_user_file

    frames = []
    tb = exc.__traceback__
    while tb is not None:
        if is_user_file(tb.tb_frame.f_code.co_filename):
            frames.append(tb.tb_frame)
        tb = tb.tb_next
    return frames[::-1]


def carried_names(where: Location | None) -> list[str]:
    """Names both passed to and assigned from the call at ``where``: ``out, h = rnn(x, h)``."""
    if where is None:
        return []
    tree = _parse(where[0])
    if tree is None:
        return []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and node.lineno <= where[1] <= (node.end_lineno or 0):
            targets = {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            if not isinstance(node.value, ast.Call):
                continue
            used = {n.id for a in [*node.value.args, *[k.value for k in node.value.keywords]]
                    for n in ast.walk(a) if isinstance(n, ast.Name)}
            return sorted(targets & used)
    return []
