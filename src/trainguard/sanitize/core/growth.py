"""The line that grows a graph holder: in the holding frame, or for one reached through an
object's attributes, in the owner's class.

When ``holders.find_holder`` finds old graphs through attributes (``meter.sum``,
``self.stats[...].sum``, ``self.hidden_trace``), the fix belongs where that attribute grows: the
statement in the methods of the owning object's class (``self.sum += val * n``,
``self.hidden_trace.append(h)``, ``self.train_losses.append(loss)`` in a LightningModule), not in
the frame that happens to hold the object; and when that method only stores what it is given
(``self.preds.append(preds)`` in ``update(self, preds, target)``), the call in the holding frame
that hands it a tensor with its graph (``meter.update(torch.sigmoid(logits), y)``), where a
``.detach()`` or ``.item()`` belongs. Bounded like every walk (``bounds.py``):
``CONTAINER_DEPTH`` containers per attribute, ``CONTAINER_NEWEST`` items each, the user's methods
among the first 64 of each of 8 classes of the MRO, one parse per file.
"""

from __future__ import annotations

import ast
import itertools
from types import CodeType
from typing import Any, Callable

from trainguard.placement import initial_value
from trainguard.sanitize.core.bounds import CONTAINER_DEPTH, CONTAINER_NEWEST, parse_file
from trainguard.sanitize.core.frames import Location, is_user_code
from trainguard.sanitize.core.holders import Holder, _inside, attribute_path, path_key
from trainguard.sanitize.core.source import function_at

__all__ = ["accumulation_line", "attribute_accumulation_line", "storing_call",
           "argument_storing_method", "frame_call", "passed_accumulation_line", "bare_names"]

_CLASSES = 8  # classes of the owner's MRO looked at (the user's own come first)
_METHODS = CONTAINER_NEWEST * 4  # methods of one class looked at
_ACCUMULATING_METHODS = {"append", "extend", "insert", "add", "appendleft"}


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _combines(value: ast.AST, name: str) -> bool:
    """Whether ``value`` combines variable ``name`` with something else: ``total + loss``,
    ``loss if total is None else total + loss``, ``torch.cat([hist, h])``."""
    return _combines_with(value, lambda n: isinstance(n, ast.Name) and n.id == name)


def _combines_with(value: ast.AST, old: Callable[[ast.AST], bool]) -> bool:
    """Whether an operand of a binary operation or an argument of a call in ``value`` holds a
    node ``old`` picks (the old value being rebuilt)."""
    for node in ast.walk(value):
        if isinstance(node, ast.BinOp):
            operands = [node.left, node.right]
        elif isinstance(node, ast.Call):
            operands = [*node.args, *(k.value for k in node.keywords)]
        else:
            continue
        if any(old(n) for o in operands for n in ast.walk(o)):
            return True
    return False


def entry_key(node: ast.AST) -> Any:
    """The constant key of the entry an accumulation grows: ``'gp'`` for ``hist['gp']``,
    ``self.history['gp']`` or ``h.setdefault('gp', [])``; None when it names none."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            return node.slice.value
        if isinstance(node, ast.Call):
            if (isinstance(node.func, ast.Attribute) and node.func.attr in ("setdefault", "get")
                    and node.args and isinstance(node.args[0], ast.Constant)):
                return node.args[0].value
            node = node.func
        node = node.value  # type: ignore[attr-defined]
    return None


def grown_target(node: ast.AST) -> ast.AST | None:
    """What an accumulating statement grows: the target of ``+=`` or ``=``, the receiver of
    ``.append(...)``."""
    if isinstance(node, ast.AugAssign):
        return node.target
    if isinstance(node, ast.Assign):
        return node.targets[0]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.value
    return None


def accumulation_line(code: CodeType, name: str, key: Any = None) -> Location | None:
    """The first statement inside ``code`` that accumulates into variable ``name`` (into its
    entry ``key`` when one does: ``history['gp'].append(gp)``, not the entry before it)."""
    tree = parse_file(code.co_filename)
    if tree is None:
        return None
    lines = [line for _, _, line in code.co_lines() if line is not None]
    if code.co_name == "<module>":
        low, high = 1, 10**9
    else:
        low, high = (min(lines), max(lines)) if lines else (code.co_firstlineno, 10**9)
    hits = []
    for node in ast.walk(tree):
        lineno = getattr(node, "lineno", 0)
        if not low <= lineno <= high:
            continue
        if (isinstance(node, ast.AugAssign) and _root_name(node.target) == name) or (
                isinstance(node, ast.Assign)
                and any(_root_name(t) == name for t in node.targets)
                and _combines(node.value, name)) or (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in _ACCUMULATING_METHODS
                and _root_name(node.func.value) == name and node.args):
            hits.append(node)
    best = _first(hits, key)
    if best is None:
        return None
    return (code.co_filename, best.lineno, best.col_offset + 1)  # type: ignore[attr-defined]


def _first(hits: list[ast.AST], key: Any) -> ast.AST | None:
    """The first of the statements ``hits`` in source order; with ``key``, the first that grows
    that entry, when one does."""
    keyed = [n for n in hits if key is not None and entry_key(grown_target(n)) == key]
    return min(keyed or hits, key=lambda n: (n.lineno, n.col_offset),  # type: ignore[attr-defined]
               default=None)


def attribute_accumulation_line(holder: Holder) -> Location | None:
    """For a holder reached through an object's attributes (``meter.sum``, ``self.trace``): the
    first statement in the methods of the class of the object that owns the last attribute that
    grows it (``self.sum += val``, ``self.trace.append(h)``, ``self.sum = self.sum + val``), or
    None. The attributes are followed from the frame's variable with ``vars()`` only (no user
    code runs); a container on the way ends the walk there."""
    parts = attribute_path(holder.path).split(".")
    if len(parts) < 2:
        return None
    value = holder.frame.f_locals.get(holder.name)
    owner, attr = None, None
    for part in parts[1:]:
        found = None
        for depth in range(CONTAINER_DEPTH):
            try:
                attrs = vars(value)
            except TypeError:  # a container (its items are not in the path): the first item
                # inside it that has the attribute
                attrs = None
            if isinstance(attrs, dict) and part in attrs:
                found = value
                break
            inside = [item for item, key in itertools.islice(_inside(value), CONTAINER_NEWEST)
                      if key[:1] in ("", "[")] if attrs is None else []
            value = next((item for item in inside if isinstance(getattr(item, "__dict__", None),
                                                                dict)
                          and part in vars(item)), None)
            if value is None:
                break
        if found is None:
            break
        owner, attr, value = found, part, vars(found)[part]
    if owner is None or attr is None:
        return None
    best: Location | None = None
    for cls in type(owner).__mro__[:_CLASSES]:
        for func in list(vars(cls).values())[:_METHODS]:
            code = getattr(func, "__code__", None)
            if not isinstance(code, CodeType) or not code.co_argcount or \
                    not is_user_code(code):
                continue
            line = _self_accumulation(code, code.co_varnames[0], attr, path_key(holder.path))
            if line is not None and (best is None or line[0] == best[0] and line < best):
                best = line
        if best is not None:  # the most derived class that grows it
            return best
    return None


def _is_self_attr(node: ast.AST, self_name: str, attr: str) -> bool:
    """``self.attr`` (``self`` being the method's first argument, whatever its name), or an item
    of it: ``self.attr[k]``, ``self.attr.setdefault(k, [])``, ``self.attr.get(k)``."""
    while isinstance(node, ast.Subscript) or (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("setdefault", "get")):
        node = node.value if isinstance(node, ast.Subscript) else node.func.value
    return (isinstance(node, ast.Attribute) and node.attr == attr
            and isinstance(node.value, ast.Name) and node.value.id == self_name)


def _self_accumulation(code: CodeType, self_name: str, attr: str, key: Any = None
                       ) -> Location | None:
    """The first statement in method ``code`` that grows ``self.attr``: ``self.attr += ...``,
    ``self.attr = self.attr + ...`` (or a comprehension over its entries,
    :func:`_combines_self`), ``self.attr.append(...)`` (or another growing method); else
    the first store into an entry, ``self.attr[k] = value`` (a running average kept per key:
    ``old = self.stats.get(k); self.stats[k] = beta * old + (1 - beta) * value``; the holder is
    known to keep graphs of several steps, so what enters it through an entry grows it). With
    ``key``, a statement growing that entry (``self.history['gp'].append(gp)``) comes first."""
    tree = parse_file(code.co_filename)
    if tree is None:
        return None
    lines = [line for _, _, line in code.co_lines() if line is not None]
    low, high = (min(lines), max(lines)) if lines else (code.co_firstlineno, code.co_firstlineno)
    hits = []
    entry: ast.AST | None = None
    for node in ast.walk(tree):
        lineno = getattr(node, "lineno", 0)
        if not low <= lineno <= high:
            continue
        hit = (isinstance(node, ast.AugAssign) and _is_self_attr(node.target, self_name, attr)) or (
            isinstance(node, ast.Assign)
            and any(_is_self_attr(t, self_name, attr) for t in node.targets)
            and _combines_self(node.value, self_name, attr)) or (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in _ACCUMULATING_METHODS
            and _is_self_attr(node.func.value, self_name, attr)
            and bool(node.args))
        if hit:
            hits.append(node)
        elif (code.co_name != "__init__" and isinstance(node, ast.Assign)
              and not initial_value(node.value)  # (``self.values[key] = []``: no graph yet)
              and any(isinstance(t, ast.Subscript) and _is_self_attr(t, self_name, attr)
                      for t in node.targets)
              and (entry is None or lineno < entry.lineno)):  # type: ignore[attr-defined]
            entry = node
    best = _first(hits, key) or entry
    if best is None:
        return None
    return (code.co_filename, best.lineno, best.col_offset + 1)  # type: ignore[attr-defined]


def _combines_self(value: ast.AST, self_name: str, attr: str) -> bool:
    """Whether ``value`` rebuilds ``self.attr`` from its own old value combined with something
    else: ``self.sum + val``, ``torch.cat([self.trace, h])``, and also inside a comprehension,
    ``{k: self.meters.get(k, 0.0) + v for k, v in parts.items()}``."""
    return _combines_with(value, lambda n: _is_self_attr(n, self_name, attr))


def bare_names(expr: ast.AST) -> list[ast.Name]:
    """The names of ``expr`` used as values themselves, not as the object of a subscript or an
    attribute (``val * n`` gives ``val``; ``state["loss"]`` gives none)."""
    picked = {id(n.value) for n in ast.walk(expr) if isinstance(n, (ast.Subscript, ast.Attribute))}
    return [n for n in ast.walk(expr) if isinstance(n, ast.Name) and id(n) not in picked]


def storing_call(holder: Holder, grown: Location) -> Location | None:
    """The call in ``holder``'s frame of the method holding statement ``grown`` on the object
    that owns the grown attribute (``train_auroc.update(probs, y)`` for ``train_auroc.preds``),
    when that statement grows the attribute with one of the method's parameters itself (the
    method stores what it is given: a meter); the first such call in source order, else None.
    A method that picks an entry of what it is given (``self.total += state["loss"]`` in a
    callback) chose what to keep: its own line is the one to change."""
    method = argument_storing_method(holder, grown)
    if method is None:
        return None
    return frame_call(holder.frame.f_code, holder.path.rsplit(".", 1)[0], method.name,
                      path_key(holder.path))


def argument_storing_method(holder: Holder, grown: Location) -> Any:
    """The method holding statement ``grown`` when that statement grows an attribute of
    ``holder``'s path with one of the method's parameters itself (``self.sum += value * n`` in
    ``update(self, value, n)``), else None."""
    if "." not in holder.path:
        return None
    method = function_at(grown[0], grown[1])
    if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    params = {a.arg for a in method.args.args[1:]} | {a.arg for a in method.args.kwonlyargs}
    stored = [n for n in ast.walk(method) if getattr(n, "lineno", None) == grown[1]
              and isinstance(n, (ast.AugAssign, ast.Call, ast.Assign))]
    values = [v for n in stored for v in ([n.value] if not isinstance(n, ast.Call) else n.args)]
    if not any(x.id in params for v in values for x in bare_names(v)):
        return None  # (it picks an entry of what it is given, state["loss"]: its own choice)
    return method


def frame_call(code: CodeType, owner: str, name: str, key: Any = None) -> Location | None:
    """The first call in ``code`` of method ``name`` on ``owner`` (``meter.update(...)``,
    ``self.stats.setdefault(k, Meter()).update(...)``, ``meter["loss"] = ...`` for
    ``__setitem__``); with ``key``, a store under that key first."""
    scope = parse_file(code.co_filename)
    lines = [line for _, _, line in code.co_lines() if line is not None]
    if scope is None or not lines:
        return None
    low, high = (1, 10**9) if code.co_name == "<module>" else (min(lines), max(lines))
    calls = [n for n in ast.walk(scope) if low <= getattr(n, "lineno", 0) <= high and (
        _receiver_of(ast.unparse(n.func.value), owner) if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute) and n.func.attr == name else
        name == "__setitem__" and isinstance(n, ast.Subscript)  # ``meter["loss"] = loss``
        and isinstance(n.ctx, ast.Store) and _receiver_of(ast.unparse(n.value), owner))]
    first = min(calls, default=None, key=lambda n: (not isinstance(n, ast.Subscript) or key is None
                                                    or entry_key(n) != key, n.lineno, n.col_offset))
    return (code.co_filename, first.lineno, first.col_offset + 1) if first else None


def _receiver_of(receiver: str, owner: str) -> bool:
    """``meter`` for ``meter``; ``self.stats.setdefault(k, Meter())`` or ``meters[k]`` for an
    owner reached through ``self.stats``/``meters``."""
    return receiver == owner or receiver.startswith((owner + ".", owner + "["))


def passed_accumulation_line(holder: Holder) -> Location | None:
    """For a holder ``obj.attr`` (``state.metrics``, ``obj`` a variable of the frame, often a
    parameter) or a variable ``obj`` (``running['total']``): the first statement of the frame's
    own code growing it (``state.metrics.append({"loss": loss})`` in ``ppo_update(..., state)``),
    else of a function of the user's code the frame passes ``obj`` to (``log_step(state, loss)``,
    ``accumulate(running, parts)``) growing it through its parameter; the one to change, or
    None. Only plain names are resolved (locals, then globals)."""
    parts = attribute_path(holder.path).split(".")
    code, key = holder.frame.f_code, path_key(holder.path)
    tree = parse_file(code.co_filename) if len(parts) <= 2 else None
    lines = [line for _, _, line in code.co_lines() if line is not None]
    if tree is None or not lines:
        return None
    own = (_self_accumulation(code, holder.name, parts[1], key) if len(parts) == 2
           else accumulation_line(code, holder.name, key))
    if own is not None:
        return own
    low, high = (1, 10**9) if code.co_name == "<module>" else (min(lines), max(lines))
    scope = {**holder.frame.f_globals, **holder.frame.f_locals}
    calls = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Name) and low <= n.lineno <= high),
                   key=lambda n: (n.lineno, n.col_offset))
    for call in calls:
        callee = getattr(scope.get(call.func.id), "__code__", None)  # type: ignore[attr-defined]
        if not isinstance(callee, CodeType) or not is_user_code(callee):
            continue
        params = [callee.co_varnames[i] for i, arg in enumerate(call.args[:callee.co_argcount])
                  if isinstance(arg, ast.Name) and arg.id == holder.name]
        params += [k.arg for k in call.keywords if k.arg and isinstance(k.value, ast.Name)
                   and k.value.id == holder.name]
        for param in params:  # (a plain variable: ``accumulate(running, parts)`` growing it)
            line = (_self_accumulation(callee, param, parts[1], key) if len(parts) == 2
                    else accumulation_line(callee, param, key))
            if line is not None:
                return line
    return None
