"""The line that grows a graph holder reached through an object's attributes.

When ``holders.find_holder`` finds old graphs through attributes (``meter.sum``,
``self.stats[...].sum``, ``self.hidden_trace``), the fix belongs where that attribute grows: the
statement in the methods of the owning object's class (``self.sum += val * n``,
``self.hidden_trace.append(h)``, ``self.train_losses.append(loss)`` in a LightningModule), not in
the frame that happens to hold the object. Bounded like every walk (``bounds.py``):
``CONTAINER_DEPTH`` containers per attribute, ``CONTAINER_NEWEST`` items each, the user's methods
among the first 64 of each of 8 classes of the MRO, one parse per file.
"""

from __future__ import annotations

import ast
import itertools
from types import CodeType

from trainguard.sanitize.core.bounds import CONTAINER_DEPTH, CONTAINER_NEWEST, parse_file
from trainguard.sanitize.core.frames import Location, is_user_code
from trainguard.sanitize.core.holders import _ACCUMULATING_METHODS, Holder, _inside

__all__ = ["attribute_accumulation_line"]

_CLASSES = 8  # classes of the owner's MRO looked at (the user's own come first)
_METHODS = CONTAINER_NEWEST * 4  # methods of one class looked at


def attribute_accumulation_line(holder: Holder) -> Location | None:
    """For a holder reached through an object's attributes (``meter.sum``, ``self.trace``): the
    first statement in the methods of the class of the object that owns the last attribute that
    grows it (``self.sum += val``, ``self.trace.append(h)``, ``self.sum = self.sum + val``), or
    None. The attributes are followed from the frame's variable with ``vars()`` only (no user
    code runs); a container on the way ends the walk there."""
    parts = holder.path.split(".")
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
                      if not key] if attrs is None else []
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
            line = _self_accumulation(code, code.co_varnames[0], attr)
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


def _self_accumulation(code: CodeType, self_name: str, attr: str) -> Location | None:
    """The first statement in method ``code`` that grows ``self.attr``: ``self.attr += ...``,
    ``self.attr = self.attr + ...``, ``self.attr.append(...)`` (or another growing method); else
    the first store into an entry, ``self.attr[k] = value`` (a running average kept per key:
    ``old = self.stats.get(k); self.stats[k] = beta * old + (1 - beta) * value``; the holder is
    known to keep graphs of several steps, so what enters it through an entry grows it)."""
    tree = parse_file(code.co_filename)
    if tree is None:
        return None
    lines = [line for _, _, line in code.co_lines() if line is not None]
    low, high = (min(lines), max(lines)) if lines else (code.co_firstlineno, code.co_firstlineno)
    best: ast.AST | None = None
    entry: ast.AST | None = None
    for node in ast.walk(tree):
        lineno = getattr(node, "lineno", 0)
        if not low <= lineno <= high:
            continue
        hit = (isinstance(node, ast.AugAssign) and _is_self_attr(node.target, self_name, attr)) or (
            isinstance(node, ast.Assign) and isinstance(node.value, ast.BinOp)
            and any(_is_self_attr(t, self_name, attr) for t in node.targets)
            and any(_is_self_attr(n, self_name, attr) for n in ast.walk(node.value))) or (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in _ACCUMULATING_METHODS and _is_self_attr(node.func.value, self_name, attr)
            and bool(node.args))
        if hit and (best is None or (lineno, node.col_offset)
                    < (best.lineno, best.col_offset)):  # type: ignore[attr-defined]
            best = node
        elif (not hit and code.co_name != "__init__" and isinstance(node, ast.Assign)
              and not isinstance(node.value, ast.Constant)
              and any(isinstance(t, ast.Subscript) and _is_self_attr(t, self_name, attr)
                      for t in node.targets)
              and (entry is None or lineno < entry.lineno)):  # type: ignore[attr-defined]
            entry = node
    best = best or entry
    if best is None:
        return None
    return (code.co_filename, best.lineno, best.col_offset + 1)  # type: ignore[attr-defined]
