"""Finding who keeps a graph alive: a user variable that holds old graphs, and the line that
accumulates into it.

Used when a check has seen that graphs outlive their step: the live user frames are searched for a
variable whose autograd graphs carry a node stamped by the watcher (``node.metadata``, a ``Made``)
at earlier steps: a tensor, or tensors inside it (lists, tuples, dicts, sets, deques and the
attributes of objects, nested: ``history.append({"loss": loss})``, ``self.losses.append(loss)``),
with the path that reaches them (``self.history['gp']``). ``growth.py`` then finds the statement
that accumulates into it.

Every walk here is bounded (``bounds.py``): graphs by :data:`~trainguard.sanitize.core.bounds.GRAPH_NODES`
nodes, the stack by :data:`~trainguard.sanitize.core.bounds.FRAMES` user frames, variables by
:data:`~trainguard.sanitize.core.bounds.CONTAINER_ITEMS` values, source files by
:data:`~trainguard.sanitize.core.bounds.SOURCE_CHARS` characters.
"""

from __future__ import annotations

import ast
import itertools
import re
import sys
import types
from collections import deque
from types import FrameType
from typing import Any, Callable, Iterator, NamedTuple

from trainguard.sanitize.core.bounds import (CONTAINER_DEPTH, CONTAINER_ITEMS, CONTAINER_NEWEST,
                                        FRAMES, GRAPH_NODES, Budget, parse_file)
from trainguard.sanitize.core.frames import Location, user_frames
from trainguard.sanitize.core.graph import (ROOT, graph_metadata, graph_nodes, graph_stamps,
                                            node_metadata)

__all__ = ["ROOT", "Holder", "graph_nodes", "node_metadata", "graph_stamps", "find_holder",
           "graph_metadata", "tensor_holding", "traceback_user_frames",
           "carried_names", "window_size", "frame_tensors"]

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


class Holder(NamedTuple):
    """A user variable found holding old graphs.

    Attributes:
        frame: the user frame whose variable it is.
        name: the variable's name in that frame.
        path: how the tensors are reached from it, for messages: ``name``, or ``name.attr`` through
            an object's attributes (``self.history``).
        kind: ``"tensor"`` (the variable is one tensor that keeps a ``grad_fn``) or ``"list"``
            (tensors inside a container or object).
        tensors: a few of the tensors found (the caller drops them after use).
    """

    frame: FrameType
    name: str
    path: str
    kind: str
    tensors: list[Any]


# Values whose insides are never searched: code, classes, modules, and the watcher's own objects.
_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
           types.CodeType, types.FrameType, str, bytes, int, float, complex, bool, type(None))
_NEAR_NODES = 2_000  # nodes of one tensor's graph walked at most (a 10^5-node graph in part)


def _spread(n: int) -> list[int]:
    """Indices into a sequence of length ``n``: the newest :data:`CONTAINER_NEWEST`, then older
    ones at doubling distances from the end (-24, -32, -48, -64, -96, ...), so that a log with
    many entries per step still shows several steps."""
    newest = CONTAINER_NEWEST
    out = list(range(n - 1, max(n - newest, 0) - 1, -1))
    back = newest
    while back < n:
        for i in (n - back - back // 2, n - 2 * back):
            if 0 <= i < n - newest and (not out or i < out[-1]):
                out.append(i)
        back *= 2
    return out


def _inside(value: Any) -> Iterator[tuple[Any, str]]:
    """The values directly inside ``value``, newest first (:func:`_spread`), each with the
    attribute name it was reached by ("" for a container item). Read without running user code
    (the built-in types' own methods, ``vars()``)."""
    if isinstance(value, (list, tuple, deque)):
        get = list.__getitem__ if isinstance(value, list) else \
            tuple.__getitem__ if isinstance(value, tuple) else deque.__getitem__
        for i in _spread(len(value)):
            yield get(value, i), ""
    elif isinstance(value, dict):
        n = dict.__len__(value)
        if n <= 100_000:
            items = list(dict.items(value))
            for i in _spread(n):
                key, item = items[i]
                yield item, _key_label(key)
        else:  # (a huge dict: its newest items only, without a list of all of them)
            for item in itertools.islice(reversed(dict.values(value)), CONTAINER_NEWEST):
                yield item, ""
    elif isinstance(value, (set, frozenset)):
        for item in itertools.islice(value, CONTAINER_NEWEST):
            yield item, ""
    elif not isinstance(value, _OPAQUE):
        if type(value).__module__.startswith("trainguard."):
            return
        try:
            attrs = vars(value)
        except TypeError:  # no __dict__ (slots, C types)
            return
        if isinstance(attrs, dict):
            for key, item in itertools.islice(reversed(dict.items(attrs)), CONTAINER_NEWEST * 4):
                if isinstance(key, str) and not key.startswith("__"):
                    yield item, key


def _key_label(key: Any) -> str:
    """``"['gp']"`` for an entry reached by a short str or int key (a path names it), else
    ``""``."""
    if type(key) is str and len(key) <= 40 and "]" not in key or type(key) is int:
        return f"[{key!r}]"
    return ""


def path_key(path: str) -> Any:
    """The last dict key a holder's ``path`` names (``'gp'`` for ``self.history['gp']``), or
    None."""
    if not path.endswith("]"):
        return None
    label = path[path.rindex("[") + 1:-1]
    try:
        return ast.literal_eval(label)
    except (ValueError, SyntaxError):
        return None


def attribute_path(path: str) -> str:
    """``path`` without its dict keys: ``self.history`` for ``self.history['gp']``."""
    return re.sub(r"\[(?:'[^']*'|\"[^\"]*\"|-?\d+)\]", "", path)


def frame_tensors(frame: FrameType, values: Budget) -> Iterator[tuple[str, str, Any, bool]]:
    """``(name, path, tensor, direct)`` for the tensors with a ``grad_fn`` in ``frame``'s
    variables, breadth first over all of them (every variable's own value before anything inside
    one), at most :data:`CONTAINER_DEPTH` levels deep, each container or object once, while
    ``values`` lasts; ``direct``: the variable is that tensor itself. Tensors without a
    ``grad_fn`` and plain values are passed over without spending the budget."""
    import torch

    tensor_type = torch.Tensor
    # (name, path, value, keyed): ``keyed`` is False once the path went through a sequence's
    # item, after which a dict key would name one entry of many (``history[i]['loss']``)
    level: list[tuple[str, str, Any, bool]] = []
    seen: set[int] = set()
    for name, value in list(frame.f_locals.items()):
        if not name.startswith("__") and not isinstance(value, _OPAQUE):
            level.append((name, name, value, True))
    for depth in range(CONTAINER_DEPTH + 1):
        below: list[tuple[str, str, Any, bool]] = []
        for name, path, value, keyed in level:
            if not values.take():
                return
            if isinstance(value, tensor_type):
                yield name, path, value, depth == 0
                continue
            if id(value) in seen or depth == CONTAINER_DEPTH:
                continue
            seen.add(id(value))
            for item, attr in _inside(value):
                if isinstance(item, _OPAQUE) or (isinstance(item, tensor_type)
                                                and item.grad_fn is None):
                    continue
                if attr[:1] == "[":
                    below.append((name, f"{path}{attr}" if keyed else path, item, keyed))
                else:
                    below.append((name, f"{path}.{attr}" if attr else path, item,
                                  keyed and bool(attr)))
        if not below:
            return
        level = below


def find_holder(is_old: Callable[[list[Any]], bool], start: FrameType | None = None
                ) -> Holder | None:
    """The innermost user frame with a variable whose graphs carry old stamps.

    Two passes over the user frames (innermost first): the first walks each tensor's graph down
    to its nearest stamps (a loss's model output, a backward root: a list of losses, a running
    sum), the second, when the first found nothing, below them too (a graph carried from step to
    step). Bounded: at most :data:`~trainguard.sanitize.core.bounds.FRAMES` user frames and
    :data:`~trainguard.sanitize.core.bounds.CONTAINER_ITEMS` values looked at in their variables per
    pass, :data:`~trainguard.sanitize.core.bounds.GRAPH_NODES` graph nodes in all and 2,000 per
    tensor. When a bound is hit, what was found so far decides.

    Args:
        is_old: given the :class:`Made` stamps found under one variable, whether they prove it
            keeps old graphs.
        start: the frame to search from, outwards (default: the caller).

    Returns:
        the :class:`Holder`, or None when no user variable is found holding them.
    """
    start = start if start is not None else sys._getframe(1)
    nodes = Budget(GRAPH_NODES)
    for nearest in (True, False):
        found = _search(is_old, start, nodes, nearest)
        if found is not None or nodes.spent:
            return found
    return None


def _search(is_old: Callable[[list[Any]], bool], start: FrameType, nodes: Budget,
            nearest: bool) -> Holder | None:
    """One pass of :func:`find_holder`."""
    from trainguard.sanitize.core.records import MADE

    def stamped(node: Any) -> bool:  # (the first pass stops at a model's output)
        meta = node_metadata(node)
        return bool(meta) and MADE in meta

    values = Budget(CONTAINER_ITEMS)
    for frame in user_frames(start, limit=FRAMES):
        stamps: dict[str, list[Any]] = {}
        held_by: dict[str, list[Any]] = {}
        seen: set[int] = set()
        for name, path, tensor, direct in frame_tensors(frame, values):
            if id(tensor) in seen:
                continue
            seen.add(id(tensor))
            more = graph_stamps(tensor.grad_fn, limit=_NEAR_NODES, budget=nodes,
                                stop=stamped if nearest else None)
            if not more:
                continue
            mine = stamps.setdefault(name, [])
            mine += more
            held = held_by.setdefault(name, [])
            if len(held) < 4:
                held.append(tensor)
            if is_old(mine):
                kind = "tensor" if direct and len(held) == 1 else "list"
                return Holder(frame, name, path, kind, held)
            if nodes.spent:
                return None
        if values.spent:
            return None
    return None


def window_size(held: Holder) -> int | None:
    """The ``maxlen`` of the container ``held.path`` names, when it is a ``deque`` built with one
    (``self.recent = deque(maxlen=200)``): it drops its oldest entry at each append, so what it
    holds is a window of fixed size. None otherwise. Reads the path without running user code
    (``vars()``, ``dict.get``); never raises."""
    try:
        value: Any = held.frame.f_locals.get(held.name)
        for part in re.findall(r"\.(\w+)|\[([^\]]*)\]", held.path[len(held.name):]):
            attr, key = part
            if attr:
                attrs = vars(value) if not isinstance(value, _OPAQUE) else None
                value = dict.get(attrs, attr) if isinstance(attrs, dict) else None
            else:
                value = dict.get(value, ast.literal_eval(key)) if isinstance(value, dict) else None
        if isinstance(value, deque) and value.maxlen is not None:
            return value.maxlen
    except Exception:  # a diagnosis aid: any surprise means "not a window"
        return None
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
    from trainguard.sanitize.core.frames import is_user_file

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
    tree = parse_file(where[0])
    if tree is None:
        return []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and node.lineno <= where[1] <= (node.end_lineno or 0):
            if not isinstance(node.value, ast.Call):
                continue
            # what is bound: whole targets (``self.fake`` of ``self.fake = net(self.real)`` is
            # not ``self``, which the call's argument also reads)
            targets = {p for t in node.targets for p in _bound_paths(t)}
            used = {_dotted(n) for a in [*node.value.args, *[k.value for k in node.value.keywords]]
                    for n in ast.walk(a) if isinstance(n, (ast.Name, ast.Attribute))}
            return sorted(targets & used - {None})  # type: ignore[operator]
    return []


def _dotted(node: ast.AST) -> str | None:
    """``self.h`` for an attribute chain of names, ``h`` for a name; None otherwise."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base is not None else None
    return None


def _bound_paths(target: ast.AST) -> list[str]:
    """The names and attribute chains an assignment target binds (tuples unpacked)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return [p for t in target.elts for p in _bound_paths(t)]
    if isinstance(target, ast.Starred):
        return _bound_paths(target.value)
    path = _dotted(target)
    return [path] if path is not None else []


def rebound_before(where: Location, name: str) -> Location | None:
    """The latest statement before the call at ``where``, in the loop around it, that rebinds
    ``name`` from itself through a call (``hidden = repackage_hidden(hidden)``): where the carried
    state was meant to be cut. None when there is none (or the call is in no loop)."""
    tree = parse_file(where[0])
    if tree is None:
        return None
    loops = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While))
             and n.lineno < where[1] <= (n.end_lineno or 0)]
    if not loops:
        return None
    loop = max(loops, key=lambda n: n.lineno)  # the innermost
    found = None
    for node in ast.walk(loop):
        if isinstance(node, ast.Assign) and node.lineno < where[1] and \
                any(isinstance(t, ast.Name) and t.id == name for t in node.targets) and \
                isinstance(node.value, ast.Call) and any(
                    isinstance(a, ast.Name) and a.id == name for a in node.value.args):
            if found is None or node.lineno > found[1]:
                found = (where[0], node.lineno, node.col_offset + 1)
    return found
