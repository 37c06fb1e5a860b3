"""Selections by rank: an expression that picks one item of a sequence by the values of another,
and whether what it picks is kept as the model.

``np.argmax(history["val_acc"])``, ``max(range(n), key=lambda e: accs[e])``,
``sorted(runs, key=lambda r: r["loss"])[0]`` and ``accs.index(max(accs))`` all return the
position (or item) where a score is highest or lowest: :func:`ranking` gives the score that
decides, :func:`kept_as_model` whether the pick restores, loads or names the model kept.
"""

from __future__ import annotations

import ast
import re

from trainguard.lint.astutil import dotted, kwarg, parent, walk_local
from trainguard.lint.dataflow import scope_of

__all__ = ["ranking", "kept_as_model"]

_ARG = {"argmax", "argmin", "nanargmax", "nanargmin"}
# (wrappers that hand the same values on: ``np.argmax(np.array(accs))``)
_AS_ARRAY = {"array", "asarray", "tensor", "as_tensor", "stack", "Tensor", "Series"}
# what takes the pick as a model: ``model.load_state_dict(states[best])``, ``torch.load(path)``
_LOADS = re.compile(r"^(load_state_dict|load|load_checkpoint|load_from_checkpoint|"
                    r"load_weights|set_weights|restore|copyfile|copy|copy2)$")
# a pick named for the model it keeps: ``best_model``, ``best_state``, ``best_ckpt``
_MODEL_NAME = re.compile(r"best.*(model|state|ckpt|checkpoint|weights|snapshot|net|params)|"
                         r"(model|state|ckpt|checkpoint|weights|snapshot)s?_?best", re.I)


def ranking(call: ast.Call) -> ast.AST | None:
    """The expression whose values decide what ``call`` picks: the array of
    ``np.argmax(a)``/``a.argmin()``, the ``key`` of ``max``/``min``/``sorted`` (the body of a
    ``lambda``, the mapping of ``accs.__getitem__``), the list of ``accs.index(max(accs))``;
    None for any other call, and for ``max(accs)`` without a key (a value, not a pick)."""
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    if name in _ARG:
        if isinstance(f, ast.Attribute) and dotted(f.value) not in ("np", "numpy", "torch"):
            return _unwrapped(f.value)  # accs.argmax()
        return _unwrapped(call.args[0]) if call.args else None
    if isinstance(f, ast.Name) and name in ("max", "min", "sorted"):
        key = kwarg(call, "key")
        seq = call.args[0] if len(call.args) == 1 else None
        column = 0 if key is None else _column_of(key)
        if column is not None:  # max(enumerate(accs), key=lambda t: t[1]), min(zip(accs, ws))
            return _column(seq, column)
        if isinstance(key, ast.Lambda):
            return key.body
        if isinstance(key, ast.Attribute) and key.attr in ("__getitem__", "get"):
            return key.value
        return key
    if name == "index" and isinstance(f, ast.Attribute) and len(call.args) == 1:
        inner = call.args[0]
        if isinstance(inner, ast.Call) and dotted(inner.func) in ("max", "min"):
            return f.value
    return None


def _column_of(key: ast.AST) -> int | None:
    """``i`` for a key that reads item ``i`` of each element: ``lambda t: t[1]``,
    ``itemgetter(1)``."""
    body = key.body if isinstance(key, ast.Lambda) and len(key.args.args) == 1 else None
    if isinstance(body, ast.Subscript) and isinstance(body.value, ast.Name) and \
            body.value.id == key.args.args[0].arg:  # type: ignore[union-attr]
        index = body.slice
    elif isinstance(key, ast.Call) and (dotted(key.func) or "").endswith("itemgetter") and \
            len(key.args) == 1:
        index = key.args[0]
    else:
        return None
    return index.value if isinstance(index, ast.Constant) and isinstance(index.value, int) \
        else None


def _column(seq: ast.AST | None, i: int) -> ast.AST | None:
    """The sequence behind item ``i`` of ``zip(a, b)`` or ``enumerate(a)`` (``a`` for item 1;
    item 0 of ``enumerate`` is the position itself)."""
    if not isinstance(seq, ast.Call) or seq.keywords:
        return None
    if dotted(seq.func) == "zip" and i < len(seq.args):
        return _unwrapped(seq.args[i])
    if dotted(seq.func) == "enumerate" and i == 1 and seq.args:
        return _unwrapped(seq.args[0])
    return None


def _unwrapped(node: ast.AST) -> ast.AST:
    while isinstance(node, ast.Call) and node.args and \
            (dotted(node.func) or "").rsplit(".", 1)[-1] in _AS_ARRAY:
        node = node.args[0]
    return node


def kept_as_model(call: ast.Call) -> bool:
    """What ``call`` picks is the model kept: it is loaded (``model.load_state_dict(
    history["state"][best_epoch])``, ``torch.load(f"ckpt_{best}.pt")``), directly or through a
    name it is stored in (and one more name indexed by that one: ``best_state =
    snapshots[best_epoch]``), or stored in a name for the kept model (``best_model = max(models,
    key=...)``). A pick only printed or logged is not."""
    top = _outermost(call)
    if _loaded(top):
        return True
    p = parent(top)
    if not isinstance(p, ast.Assign) or len(p.targets) != 1:
        return False
    target = dotted(p.targets[0]) or ""
    if _MODEL_NAME.search(target.rsplit(".", 1)[-1]):
        return True
    return bool(target) and _name_loaded(target, p, depth=2)


def _outermost(node: ast.AST) -> ast.AST:
    """``node`` with what keeps the same pick around it: ``int(...)``, ``(...).item()``,
    ``sorted(...)[0]``, ``max(rows, key=...)["epoch"]``."""
    while True:
        p = parent(node)
        if isinstance(p, ast.Subscript) and p.value is node:
            node = p
        elif isinstance(p, ast.Call) and dotted(p.func) in ("int", "float") and node in p.args:
            node = p
        elif isinstance(p, ast.Attribute) and p.attr in ("item", "tolist") and \
                isinstance(parent(p), ast.Call):
            node = parent(p)  # type: ignore[assignment]
        else:
            return node


def _loaded(node: ast.AST) -> bool:
    """``node`` sits in the arguments of a call that loads or restores a model."""
    n = parent(node)
    while n is not None and not isinstance(n, ast.stmt):
        if isinstance(n, ast.Call) and node is not n.func and \
                _LOADS.match((dotted(n.func) or "").rsplit(".", 1)[-1]):
            return True
        n = parent(n)
    return False


def _name_loaded(target: str, assign: ast.Assign, depth: int) -> bool:
    """The name (or ``self.`` attribute) ``target`` bound by ``assign`` is read, later in its
    scope, where a model is loaded, or indexes a value stored in a name that is."""
    for n in walk_local(scope_of(assign)):
        if not (isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load) and
                dotted(n) == target and n.lineno >= assign.lineno):
            continue
        if _loaded(n):
            return True
        p = parent(n)
        while isinstance(p, ast.Subscript):  # snapshots[best_epoch]
            p = parent(p)
        if depth > 1 and isinstance(p, ast.Assign) and len(p.targets) == 1 and \
                dotted(p.targets[0]) and (_MODEL_NAME.search(dotted(p.targets[0]) or "") or
                                          _name_loaded(dotted(p.targets[0]) or "", p, depth - 1)):
            return True
    return False
