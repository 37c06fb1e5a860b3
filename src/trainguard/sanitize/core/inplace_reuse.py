"""Where an in-place module overwrote a tensor an earlier statement had used (and so the graph
had saved): read from the models' ``forward`` methods and the live modules, for TG207.

A ``forward`` reads ``x`` (``sc = self.shortcut(x)``: the convolution saves ``x`` for backward),
then hands the same ``x`` to a submodule that changes it in place before anything else: an
in-place module itself (``x = self.relu(x)``, Jinfu-pku/GMNet#3), a ``Sequential`` whose first
layer is one (``nn.Sequential(nn.ReLU(inplace=True), conv, ...)``, pytorch/pytorch#15428), or a
block whose own ``forward`` applies one to its input first (a pre-activation unit's
``if self.activate: x = self.activ(x)``, the flag read from the live module). The place is the
call itself when the in-place module is called there, else that module's construction (the
``inplace=True`` to drop) in the ``__init__`` of the nearest user class that holds it.
"""

from __future__ import annotations

import ast
from types import CodeType
from typing import Any

from trainguard.sanitize.core.frames import is_user_file
from trainguard.sanitize.core.source import function_node

__all__ = ["reused_then_inplace"]

_DEPTH = 8  # containers and blocks followed down to the in-place module
Place = tuple[str, int, int, str]


def _user_forward(module: Any) -> tuple[CodeType, ast.AST] | None:
    code = getattr(getattr(type(module), "forward", None), "__code__", None)
    if not isinstance(code, CodeType) or not is_user_file(code.co_filename):
        return None
    node = function_node(code)
    return (code, node) if node is not None else None


def _first_call(expr: ast.AST, name: str) -> str | None:
    """``attr`` when ``expr`` applies ``self.attr`` to ``name`` before anything else
    (``self.attr(name)``, also inside ``self.conv(self.attr(name))``)."""
    while isinstance(expr, ast.Call) and len(expr.args) == 1 and not expr.keywords:
        func, arg = expr.func, expr.args[0]
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                and func.value.id == "self"):
            return None
        if isinstance(arg, ast.Name) and arg.id == name:
            return func.attr
        expr = arg
    return None


def _first_in_body(module: Any, body: list[ast.stmt], name: str) -> str | None:
    """The attribute of the submodule ``body`` applies to ``name`` first; None when another
    statement may read or change ``name`` before."""
    for stmt in body:
        if isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Attribute) and \
                isinstance(stmt.test.value, ast.Name) and stmt.test.value.id == "self":
            flag = vars(module).get(stmt.test.attr)  # (a plain attribute: no property runs)
            if not isinstance(flag, bool):
                return None
            if flag or stmt.orelse:
                return _first_in_body(module, stmt.body if flag else stmt.orelse, name)
            continue
        value = getattr(stmt, "value", None) if isinstance(
            stmt, (ast.Assign, ast.Expr, ast.Return)) else None
        return _first_call(value, name) if value is not None else None
    return None


def _first_inplace(module: Any, depth: int = 0) -> list[Any] | None:
    """The chain of modules from ``module`` down to the in-place module that its call applies
    to its input before anything else; None when there is none or it cannot be told."""
    from torch import nn

    if getattr(module, "inplace", False) is True:
        return [module]
    if depth >= _DEPTH:
        return None
    child = None
    if isinstance(module, nn.Sequential):
        child = next(iter(module._modules.values()), None)
    else:
        found = _user_forward(module)
        args = found[1].args.args if found and isinstance(
            found[1], (ast.FunctionDef, ast.AsyncFunctionDef)) else []
        if len(args) >= 2:
            attr = _first_in_body(module, found[1].body, args[1].arg)
            child = module._modules.get(attr) if attr else None
    rest = _first_inplace(child, depth + 1) if child is not None else None
    return [module, *rest] if rest else None


def _built_in_owner(chain: list[Any]) -> Place | None:
    """The ``inplace=True`` construction of the chain's last module in the ``__init__`` of the
    nearest user class above it: the one inside the statement that stores the chain's next
    module (``self.residual = nn.Sequential(nn.ReLU(inplace=True), ...)``), else the only one."""
    leaf = chain[-1]
    kind = type(leaf).__name__
    for at in range(len(chain) - 2, -1, -1):
        owner = chain[at]
        init = getattr(type(owner).__dict__.get("__init__"), "__code__", None)
        node = function_node(init) if isinstance(init, CodeType) else None
        if node is None:
            continue
        attr = next((k for k, v in owner._modules.items() if v is chain[at + 1]), None)
        built, inside = [], []
        for stmt in ast.walk(node):
            if not isinstance(stmt, ast.Assign):
                continue
            stores = any(isinstance(t, ast.Attribute) and t.attr == attr for t in stmt.targets)
            for call in ast.walk(stmt.value):
                if isinstance(call, ast.Call) and \
                        ast.unparse(call.func).rsplit(".", 1)[-1] == kind and any(
                        k.arg == "inplace" and isinstance(k.value, ast.Constant) and
                        k.value.value is True for k in call.keywords):
                    place = (init.co_filename, call.lineno, call.col_offset + 1,
                             f"the `{ast.unparse(call.func)}(..., inplace=True)` built")
                    built.append(place)
                    if stores:
                        inside.append(place)
        found = inside or built
        return found[0] if len(found) == 1 else None
    return None


def _reused_names(node: ast.AST) -> list[tuple[ast.Call, str, str]]:
    """``(call, attribute, name)`` for each ``self.attribute(name)`` call in ``node`` on a name
    that an earlier statement read since it was last assigned."""
    out = []
    for call in ast.walk(node):
        f = call.func if isinstance(call, ast.Call) else None
        if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and
                f.value.id == "self" and call.args and isinstance(call.args[0], ast.Name)):
            continue
        name = call.args[0].id
        stores = [n.lineno for n in ast.walk(node) if isinstance(n, ast.Name) and
                  n.id == name and isinstance(n.ctx, ast.Store) and n.lineno < call.lineno]
        since = max(stores, default=node.lineno)
        if any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
               and since < n.lineno < call.lineno for n in ast.walk(node)):
            out.append((call, f.attr, name))
    return out


def reused_then_inplace(models: list[Any], op: str) -> Place | None:
    """The one place where an in-place module overwrote a name an earlier statement of a user
    module's ``forward`` had used (see the module docstring); ``op`` is the in-place op PyTorch
    names ("Relu"), which an in-place module reached through a container must match. None
    when there is none or several."""
    found: dict[tuple[str, int, int], str] = {}
    for model in models:
        for sub in list(model.modules())[:256]:
            forward = _user_forward(sub)
            for call, attr, name in (_reused_names(forward[1]) if forward else ()):
                child = getattr(sub, attr, None)
                if getattr(child, "inplace", False) is True:
                    found.setdefault((forward[0].co_filename, call.lineno, call.col_offset + 1),
                                     f"`self.{attr}({name})` (in place) overwrites `{name}`, "
                                     "which an earlier statement used")
                    continue
                chain = _first_inplace(child) if child is not None else None
                if not chain or type(chain[-1]).__name__.lower() != op.lower():
                    continue
                place = _built_in_owner([sub, *chain])
                if place is not None:
                    found.setdefault(place[:3], f"the first layer that `self.{attr}({name})` "
                                     f"runs on `{name}` (which an earlier statement used), "
                                     f"{place[3]}")
    return next((*k, v) for k, v in found.items()) if len(found) == 1 else None
