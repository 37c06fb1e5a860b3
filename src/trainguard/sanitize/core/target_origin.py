"""Where a loss's target was made: the dataset line that built the batch element.

Used by TG402 once a loss call has targets of the wrong form (float class indices, labels outside
[0, 1], masks scaled by a transform). The form is decided where the dataset builds each sample
(``torch.from_numpy(mask)`` of a float array, a ``ToTensor`` that divides by 255), not at the
loss, but autograd keeps no record of a target: it never requires grad. What is alive at the loss
call is enough in the usual case:

1. the user frame that called the loss holds the target in a local variable, or in a tuple,
   list or dict held by one (``masks``, ``batch["mask"]``, ``batch[1]``), found by identity;
2. that variable is bound by a ``for`` loop of that function over a ``DataLoader`` (``for x, y in
   loader``, ``enumerate(loader)``, ``self.train_dl``; names resolved in the frame's locals,
   globals and attributes, never by calling anything; a loop over a call, ``for batch in
   dm.train_dataloader()``, takes the dataset of the latest pass the watcher saw start);
3. the loader's dataset (through ``Subset``) has a ``__getitem__`` in the user's code whose
   ``return`` gives the same position or key; that element's line is the answer: the last
   assignment of the returned name in ``__getitem__`` (``mask = self.to_tensor(mask)``), or
   the ``return`` itself when it builds the element there;
4. followed one step further: a name unpacked from a list ``__init__`` fills with one ``append``
   (``path, label = self.samples[i]``) to where ``__init__`` made that element of the appended
   tuple; an element made by a call of the user's (``self.preprocess(mask, is_mask=True)``, a
   function of ``__getitem__``'s module, through ``torch.as_tensor``-like conversions) to the
   ``return`` the call reaches, decided by ``if`` tests of parameters passed as constants.

A target taken out of the batch into a local (``masks = batch["mask"]``) is found through the
batch that still holds it. A target that a generator of the user's yielded (``x, y =
next(batches)``) is found in the locals that generator keeps while suspended: the line that last
bound it there (``y = torch.from_numpy(labels[idx]).float()``). Anything else (a target made
outside a loader, a collate function that reorders, an iterable dataset) answers None: the
finding stays at the loss line.

Cost: at a finding only, one parse of each source file involved (cached).
"""

from __future__ import annotations

import ast
import inspect
from types import FrameType, GeneratorType, SimpleNamespace
from typing import Any

from trainguard.sanitize.core.bounds import parse_file
from trainguard.sanitize.core.cuts import assigned_in_init
from trainguard.sanitize.core.frames import Location, is_user_file, read_path
from trainguard.sanitize.core.source import function_node

__all__ = ["last_binding", "loader_element", "returned_by", "target_origin",
           "unpacked_at", "unwrapped"]


_FRAMES = 4  # user frames searched outwards from the loss call (a loss helper's callers)


def target_origin(frame: FrameType | None, target: Any, passes: Any = ()) -> Location | None:
    """The line of the user's dataset that made ``target`` (see the module doc), searched from
    ``frame`` (the innermost user frame at the loss call) outwards, or None. ``passes`` (the
    watcher's ``State.loader_passes``) stand in for a loop over a call that returns a DataLoader
    (``for batch in dm.train_dataloader():``): the latest pass still running is its."""
    seen = 0
    while frame is not None and target is not None and seen < _FRAMES:
        if is_user_file(frame.f_code.co_filename):
            seen += 1
            try:
                found = _origin(frame, target, passes)
            except Exception:  # a locating aid: never in the way of the finding
                return None
            if found is not None:
                return found
        frame = frame.f_back
    try:
        return _yielded(target) if target is not None else None
    except Exception:  # a locating aid: never in the way of the finding
        return None


def _yielded(target: Any) -> Location | None:
    """For a target a generator of the user's yielded (``x, y = next(batches)``, ``for x, y in
    batches()``): the line of that generator that last bound the local holding ``target``
    before the ``yield`` it is suspended at. A suspended generator keeps its locals, so the
    tensor it handed out is found among its referents (``gc.get_referrers``: one pass over the
    tracked objects, at a finding only); None when no generator of the user's holds it."""
    import gc

    for value in gc.get_referrers(target):
        paused = value.gi_frame if isinstance(value, GeneratorType) else None
        if paused is None or not is_user_file(paused.f_code.co_filename):
            continue
        names = [name for name, _ in _holders(paused, target)]
        function = function_node(paused.f_code) if names else None
        if function is None:
            continue
        made = [last_binding(function, name, paused.f_lineno + 1) for name in names]
        made = [m for m in made if m is not None]
        if made:
            last = max(made, key=lambda n: n.lineno)
            return (paused.f_code.co_filename, last.lineno, last.col_offset + 1)
    return None


def unwrapped(dataset: Any) -> Any:
    """``dataset`` with its ``Subset`` wrappers taken off."""
    from torch.utils.data import Subset

    while isinstance(dataset, Subset):
        dataset = dataset.dataset
    return dataset


def _origin(frame: FrameType, target: Any, passes: Any) -> Location | None:
    return _made_in_dataset(*found) if (found := loader_element(frame, target, passes)) else None


def loader_element(frame: FrameType, target: Any, passes: Any) -> tuple[Any, tuple] | None:
    """``(loader, position of target in its batches)`` for a target that a loop of ``frame``'s
    function took out of a DataLoader's batches, else None."""
    function = function_node(frame.f_code)
    if function is None:
        return None
    # the local's name, and the key or index inside it (None: itself); a local taken out of
    # the batch (`masks = batch["mask"]`) is no loop variable, the batch holding it is
    for name, inner in _holders(frame, target):
        for loop in ast.walk(function):
            if isinstance(loop, (ast.For, ast.comprehension)):
                path = _path(loop.target, name)
                if path is None:
                    continue
                loader, path = _iterated(loop.iter, frame, path)
                if loader is None and isinstance(loop.iter, ast.Call):
                    loader = _running(passes, loop.iter)
                if loader is None:
                    continue
                if inner is not None:
                    path = path + (inner,)
                return loader, path
    return None


def _holders(frame: FrameType, target: Any) -> list[tuple[str, Any]]:
    """``(name, None)`` for each local bound to ``target``, then ``(name, key)`` for each local
    tuple, list or dict holding it."""
    items = list(frame.f_locals.items())
    found: list[tuple[str, Any]] = [(name, None) for name, value in items if value is target]
    for name, value in items:
        if isinstance(value, dict):
            key = next((k for k, v in value.items() if v is target), None)
            if key is not None:
                found.append((name, key))
        elif isinstance(value, (tuple, list)) and len(value) <= 16:
            index = next((i for i, v in enumerate(value) if v is target), None)
            if index is not None:
                found.append((name, index))
    return found


def _path(target: ast.AST, name: str) -> tuple[int, ...] | None:
    """The positions leading to ``name`` in a loop target (``(x, y)`` -> ``(1,)`` for y)."""
    if isinstance(target, ast.Name):
        return () if target.id == name else None
    if isinstance(target, (ast.Tuple, ast.List)):
        for i, element in enumerate(target.elts):
            inner = _path(element, name)
            if inner is not None:
                return (i,) + inner
    return None


def _iterated(expr: ast.AST, frame: FrameType, path: tuple) -> tuple[Any, tuple]:
    """The DataLoader a loop iterates and the position inside its batches, or (None, path)."""
    if isinstance(expr, ast.Call) and expr.args:
        called = _called(expr)
        if called == "enumerate":
            if not path or path[0] != 1:
                return None, path
            return _iterated(expr.args[0], frame, path[1:])
        if called in ("tqdm", "iter", "progress", "track"):  # wrappers that pass batches on
            return _iterated(expr.args[0], frame, path)
        return None, path
    value = read_path(frame, expr, global_names=True)
    from torch.utils.data import DataLoader

    return (value, path) if isinstance(value, DataLoader) else (None, path)


def _running(passes: Any, call: ast.Call) -> Any:
    """For a loop over ``dm.train_dataloader()`` (a call, not run again here): the DataLoader of
    the latest pass still running, else (the loop was left by the error) of the latest pass."""
    if isinstance(call.func, ast.Name) and call.func.id in ("enumerate", "zip", "range"):
        return None
    latest = [p for p in passes if not p.ended][-1:] or list(passes)[-1:]
    dataset = latest[0].source() if latest and latest[0].source is not None else None
    return SimpleNamespace(dataset=dataset, collate_fn=None) if dataset is not None else None


def _made_in_dataset(loader: Any, path: tuple) -> Location | None:
    if getattr(loader, "collate_fn", None) is not None and \
            getattr(loader.collate_fn, "__module__", "").split(".")[0] != "torch":
        return None  # a collate function of the user's may reorder the elements
    dataset = unwrapped(loader.dataset)
    getitem = getattr(type(dataset).__getitem__, "__code__", None)
    if getitem is None or not is_user_file(getitem.co_filename) or not path:
        return None
    tree = parse_file(getitem.co_filename)
    function = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                     and n.name == "__getitem__" and n.lineno == getitem.co_firstlineno), None) \
        if tree is not None else None
    if function is None:
        return None
    returns = [n for n in ast.walk(function) if isinstance(n, ast.Return) and n.value is not None]
    if len(returns) != 1:
        return None  # several ways out: which one made this batch is unknown
    element = _element(returns[0].value, path[0])
    if element is None:
        return None
    where = (getitem.co_filename, element.lineno, element.col_offset + 1)
    position = None  # in `name, label = self.items[i]`: label's place in each stored item
    if isinstance(element, ast.Name):
        last = last_binding(function, element.id, returns[0].lineno)
        if last is not None:
            position = unpacked_at(last, element.id)
            where, element = (getitem.co_filename, last.lineno, last.col_offset + 1), last.value
    cls = type(dataset)
    # only indexed here (`self.labels[i]`): the tensor was made where __init__ stored it
    stored = _indexed_attribute(element)
    if stored and position is not None:
        appended = _appended_in_init(cls, stored, position)
        if appended is not None:
            return appended
    made_in_init = assigned_in_init(cls, stored) if stored else None
    return made_in_init or returned_by(cls, element) or where


# calls that only convert what they are given: the form was decided inside
_CONVERTERS = frozenset({"as_tensor", "tensor", "from_numpy", "asarray", "array", "Tensor",
                         "LongTensor", "FloatTensor"})


def returned_by(cls: type | None, element: ast.AST,
                scope: dict[str, Any] | None = None) -> Location | None:
    """For an element made by a call of the user's (``torch.as_tensor(self.preprocess(mask,
    is_mask=True))``, a function of ``scope``, by default ``cls.__getitem__``'s module), the
    ``return`` that call reaches: decided by ``if`` tests of parameters the call passes as
    constants; None when that is not known."""
    while isinstance(element, ast.Call) and element.args and _called(element) in _CONVERTERS:
        element = element.args[0]
    if not isinstance(element, ast.Call):
        return None
    func = element.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
            func.value.id == "self" and cls is not None:
        found, bound = getattr(cls, func.attr, None), not isinstance(
            inspect.getattr_static(cls, func.attr, None), staticmethod)
    elif isinstance(func, ast.Name):  # a function of __getitem__'s module
        if scope is None:
            scope = getattr(getattr(cls, "__getitem__", None), "__globals__", {})
        found, bound = scope.get(func.id), False
    else:
        return None
    code = getattr(found, "__code__", None)
    node = function_node(code) if code is not None else None
    if not isinstance(node, ast.FunctionDef) or \
            any(isinstance(a, ast.Starred) for a in element.args):
        return None
    names = [a.arg for a in node.args.posonlyargs + node.args.args][1 if bound else 0:]
    env = {n: d.value for n, d in zip(names[::-1], node.args.defaults[::-1])
           if isinstance(d, ast.Constant)}
    env.update({n: a.value for n, a in zip(names, element.args) if isinstance(a, ast.Constant)})
    env.update({k.arg: k.value.value for k in element.keywords
                if k.arg is not None and isinstance(k.value, ast.Constant)})
    taken = _reached(node.body, env)
    if isinstance(taken, ast.Return):
        return (code.co_filename, taken.lineno, taken.col_offset + 1)
    return None


def _reached(body: list[ast.stmt], env: dict[str, Any]) -> ast.Return | bool | None:
    """The ``return`` a run of ``body`` reaches with the parameters in ``env``; None when it
    reaches none, False when that depends on something else (a loop, an unknown test)."""
    for stmt in body:
        if isinstance(stmt, ast.Return):
            return stmt
        if isinstance(stmt, ast.If):
            test = _truth(stmt.test, env)
            if test is None:
                return False
            taken = _reached(stmt.body if test else stmt.orelse, env)
            if taken is not None:
                return taken
        elif any(isinstance(n, ast.Return) for n in ast.walk(stmt)):
            return False
    return None


def _truth(test: ast.AST, env: dict[str, Any]) -> bool | None:
    if isinstance(test, ast.Constant):
        return bool(test.value)
    if isinstance(test, ast.Name) and test.id in env:
        return bool(env[test.id])
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _truth(test.operand, env)
        return None if inner is None else not inner
    return None


def _called(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else \
        func.attr if isinstance(func, ast.Attribute) else ""


def unpacked_at(assign: ast.AST, name: str) -> int | None:
    """``1`` for ``label`` in ``path, label = ...``; None for anything else."""
    targets = getattr(assign, "targets", [])
    if len(targets) == 1 and isinstance(targets[0], (ast.Tuple, ast.List)):
        for i, element in enumerate(targets[0].elts):
            if isinstance(element, ast.Name) and element.id == name:
                return i
    return None


def _appended_in_init(cls: type, attr: str, position: int) -> Location | None:
    """Where ``__init__`` made the element at ``position`` of the items it appends to
    ``self.<attr>`` (``self.items.append((path, label))``: the last assignment of ``label``
    before that line, or the ``append`` itself); None unless there is one such ``append``."""
    init = getattr(getattr(cls, "__init__", None), "__code__", None)
    node = function_node(init) if init is not None and is_user_file(init.co_filename) else None
    if not isinstance(node, ast.FunctionDef):
        return None
    appends = [c for c in ast.walk(node) if isinstance(c, ast.Call) and len(c.args) == 1
               and _called(c) == "append" and isinstance(c.func, ast.Attribute)
               and isinstance(c.func.value, ast.Attribute) and c.func.value.attr == attr
               and isinstance(c.func.value.value, ast.Name) and c.func.value.value.id == "self"]
    if len(appends) != 1 or not isinstance(appends[0].args[0], (ast.Tuple, ast.List)):
        return None
    items = appends[0].args[0].elts
    if position >= len(items):
        return None
    element, line = items[position], appends[0].lineno
    where = (init.co_filename, element.lineno, element.col_offset + 1)
    last = last_binding(node, element.id, line) if isinstance(element, ast.Name) else None
    if last is not None:
        where = (init.co_filename, last.lineno, last.col_offset + 1)
    return where


def last_binding(function: ast.AST, name: str, before: int) -> ast.stmt | None:
    """The last assignment (or augmented one) to ``name`` in ``function`` above line ``before``."""
    made = [n for n in ast.walk(function) if isinstance(n, (ast.Assign, ast.AugAssign))
            and n.lineno < before and _binds(n, name)]
    return max(made, key=lambda n: n.lineno) if made else None


def _indexed_attribute(node: ast.AST) -> str | None:
    """``attr`` for ``self.attr[...]`` (indexing only, no call or conversion), else None."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and \
            isinstance(node.value.value, ast.Name) and node.value.value.id == "self":
        return node.value.attr
    return None


def _element(value: ast.AST, key: Any) -> ast.AST | None:
    if isinstance(value, (ast.Tuple, ast.List)) and isinstance(key, int) and key < len(value.elts):
        return value.elts[key]
    if isinstance(value, ast.Dict) and isinstance(key, str):
        for k, v in zip(value.keys, value.values):
            if isinstance(k, ast.Constant) and k.value == key:
                return v
    return None


def _binds(node: ast.AST, name: str) -> bool:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    for target in targets:
        for n in ast.walk(target):
            if isinstance(n, ast.Name) and n.id == name:
                return True
    return False
