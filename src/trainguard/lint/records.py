"""Instances of the file's dataclasses as constants: ``cfg = RunConfig()`` then
``cfg.batch_size`` is the field's default (or what the call passes), for
:func:`trainguard.lint.consts.const_eval`; likewise a namespace built from a config
(``args = SimpleNamespace(**CONFIG["trainer"])``). A field that the file ever assigns
(``cfg.batch_size = 32``, ``setattr``) is unknown."""

from __future__ import annotations

import ast
from typing import Any

from trainguard.lint.astutil import dotted, parent
from trainguard.lint.consts import UNKNOWN, const_eval

__all__ = ["Fields", "dataclass_instance", "field_value", "namespace_instance"]

_NAMESPACES = frozenset({"SimpleNamespace", "types.SimpleNamespace", "Namespace",
                         "argparse.Namespace"})


class Fields(dict):  # type: ignore[type-arg]
    """The fields of an instance of a dataclass of the file (``RunConfig()``), read as
    attributes; a plain dict has none."""


def namespace_instance(call: ast.Call, depth: int) -> Any:
    """``SimpleNamespace(**CONFIG["trainer"], seed=0)`` (or ``argparse.Namespace(...)``): its
    attributes, from the keywords and the dicts spread into it; UNKNOWN when a spread is not a
    dict the source fixes, or for any other call."""
    if (dotted(call.func) or "") not in _NAMESPACES or call.args:
        return UNKNOWN
    out = Fields()
    for k in call.keywords:
        v = const_eval(k.value, _depth=depth)
        if k.arg is not None:
            out[k.arg] = v
        elif isinstance(v, dict):
            out.update(v)
        else:
            return UNKNOWN
    return out


def dataclass_instance(call: ast.Call, depth: int) -> Any:
    """``Config(batch_size=32)`` for a module-level ``@dataclass`` of the file: its fields, from
    the call's arguments, else their defaults (``field(default=...)``, ``default_factory=
    lambda: {...}``); UNKNOWN when a field has neither or the call spreads arguments."""
    root: ast.AST = call
    while parent(root) is not None:
        root = parent(root)  # type: ignore[assignment]
    cls = next((n for n in getattr(root, "body", []) if isinstance(n, ast.ClassDef) and
                n.name == call.func.id), None)  # type: ignore[attr-defined]
    if cls is None or not any((dotted(d.func if isinstance(d, ast.Call) else d) or "")
                              .endswith("dataclass") for d in cls.decorator_list) or \
            cls.bases or any(isinstance(a, ast.Starred) for a in call.args) or \
            any(k.arg is None for k in call.keywords):
        return UNKNOWN
    fields = [n for n in cls.body if isinstance(n, ast.AnnAssign) and
              isinstance(n.target, ast.Name) and "ClassVar" not in ast.unparse(n.annotation)]
    given = {k.arg: k.value for k in call.keywords}
    given.update({f.target.id: a for f, a in zip(fields, call.args)})  # type: ignore[union-attr]
    out = Fields()
    for f in fields:
        name = f.target.id  # type: ignore[union-attr]
        value = given.get(name, f.value)
        if isinstance(value, ast.Call) and (dotted(value.func) or "").endswith("field") and \
                name not in given:
            default = next((k.value for k in value.keywords if k.arg == "default"), None)
            factory = next((k.value for k in value.keywords if k.arg == "default_factory"),
                           None)
            value = default if default is not None else \
                factory.body if isinstance(factory, ast.Lambda) else \
                ast.Dict(keys=[], values=[]) if dotted(factory) == "dict" else None
        out[name] = const_eval(value, _depth=depth) if value is not None else UNKNOWN
    return out


def _stored_attributes(at: ast.AST) -> set[str]:
    """Attribute names the module ever assigns (``cfg.batch_size = 32``): a dataclass field
    changed anywhere is not known from its default."""
    root: ast.AST = at
    while parent(root) is not None:
        root = parent(root)  # type: ignore[assignment]
    found = getattr(root, "_tg_stored_attrs", None)
    if found is None:
        found = set()
        for n in ast.walk(root):
            if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and not (
                    isinstance(n.value, ast.Name) and n.value.id == "self" and
                    not _in_dataclass(n)):
                found.add(n.attr)  # cfg.lr = 0.1; self.x = ... only in a dataclass's methods
            elif isinstance(n, ast.Call) and dotted(n.func) == "setattr" and len(n.args) > 1:
                a = const_eval(n.args[1])
                found |= {a} if isinstance(a, str) else {"*"}
        root._tg_stored_attrs = found  # type: ignore[attr-defined]
    return found


def _in_dataclass(node: ast.AST) -> bool:
    n = node
    while (n := parent(n)) is not None:  # type: ignore[assignment]
        if isinstance(n, ast.ClassDef):
            return any("dataclass" in ast.unparse(d) for d in n.decorator_list)
    return False


def field_value(attr: ast.Attribute, base: Any) -> Any:
    """``base.attr`` when ``base`` is a dataclass instance whose field ``attr`` nothing
    reassigns."""
    if not isinstance(base, Fields) or attr.attr not in base:
        return UNKNOWN
    stored = _stored_attributes(attr)
    return UNKNOWN if attr.attr in stored or "*" in stored else base[attr.attr]
