"""What a module class's forward hooks store on ``self``.

A hook registered with ``module.register_forward_hook(hook)`` runs right after that module's
forward, with its output: ``hook(module, args, output)`` (``hook(module, args, kwargs,
output)`` with ``with_kwargs=True``;
https://pytorch.org/docs/stable/generated/torch.nn.Module.html, register_forward_hook).
A value it stores (``self.latents = output``, ``self.feats[name] = output``,
``self.cache.append(output)``) is that module's output, read later where the class reads the
attribute: the same graph, or none when the hook stored ``output.detach()``.

Found here: registrations made in a method of the class, whose hook is a method of the class
(``layer.register_forward_hook(self._save)``), a function defined in the same method, a
``lambda``, or what a method or function of the file returns for it (a hook factory,
``self._saver("pool")``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from trainguard.lint.astutil import self_attr, walk_local

__all__ = ["HookStore", "hook_stores"]

_REGISTER = ("register_forward_hook",)
_STORE_CALLS = {"append", "extend", "insert", "update", "setdefault", "__setitem__"}


@dataclass(frozen=True, slots=True)
class HookStore:
    """Hook ``hook`` (registered on ``hooked`` by ``register``) stores ``value`` into
    ``self.<attr>``; ``params`` are the hook's parameters that carry tensors (its arguments
    and output: not the module)."""

    attr: str
    value: ast.expr
    hook: ast.FunctionDef | ast.Lambda
    params: frozenset[str]
    hooked: ast.expr
    register: ast.Call


def hook_stores(cls: ast.ClassDef) -> dict[str, list[HookStore]]:
    """``attr -> the stores`` of the forward hooks that ``cls``'s methods register."""
    memo = cls.__dict__.get("_tg_hook_stores")
    if memo is not None:
        return memo
    out: dict[str, list[HookStore]] = {}
    methods = {b.name: b for b in cls.body if isinstance(b, ast.FunctionDef)}
    for method in methods.values():
        for call in walk_local(method):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and
                    call.func.attr in _REGISTER and call.args):
                continue
            hook = _hook_function(call.args[0], method, methods)
            if hook is None:
                continue
            args = [a.arg for a in hook.args.posonlyargs + hook.args.args]
            if args and args[0] == "self" and isinstance(hook, ast.FunctionDef) and \
                    hook.name in methods:
                args = args[1:]
            params = frozenset(args[1:])  # (the module itself carries no graph)
            for attr, value in _stores(hook):
                out.setdefault(attr, []).append(
                    HookStore(attr, value, hook, params, call.func.value, call))
    cls._tg_hook_stores = out  # type: ignore[attr-defined]
    return out


def _hook_function(arg: ast.expr, method: ast.FunctionDef,
                   methods: dict[str, ast.FunctionDef]) -> ast.FunctionDef | ast.Lambda | None:
    """The function a registration hands over: ``self._hook``, a nested ``def``, a ``lambda``,
    or the one a factory call returns (``self._saver(name)``, ``make_hook(name)``)."""
    if isinstance(arg, ast.Lambda):
        return arg
    if self_attr(arg) in methods:
        return methods[self_attr(arg)]  # type: ignore[index]
    if isinstance(arg, ast.Name):
        return next((n for n in walk_local(method) if isinstance(n, ast.FunctionDef) and
                     n.name == arg.id), None)
    if isinstance(arg, ast.Call):
        factory = methods.get(self_attr(arg.func) or "") or (
            _hook_function(arg.func, method, methods) if isinstance(arg.func, ast.Name)
            else None)
        if isinstance(factory, ast.FunctionDef):
            rets = [r.value for r in walk_local(factory) if isinstance(r, ast.Return)]
            if len(rets) == 1 and rets[0] is not None:
                inner = rets[0]
                if isinstance(inner, ast.Lambda):
                    return inner
                if isinstance(inner, ast.Name):
                    return next((n for n in walk_local(factory) if isinstance(
                        n, ast.FunctionDef) and n.name == inner.id), None)
    return None


def _stores(hook: ast.FunctionDef | ast.Lambda) -> list[tuple[str, ast.expr]]:
    """``(attr, value)`` for each value the hook stores into ``self.<attr>``: assigned to it or
    to an item of it, or handed to its ``append``/``update``/``__setitem__``."""
    out = []
    body = [hook.body] if isinstance(hook, ast.Lambda) else list(walk_local(hook))
    for node in (n for b in body for n in ast.walk(b)) if isinstance(hook, ast.Lambda) \
            else body:
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and \
                node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                attr = _self_root(t)
                if attr is not None:
                    out.append((attr, node.value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in _STORE_CALLS and node.args:
            attr = _self_root(node.func.value)
            if attr is not None:
                out.append((attr, node.args[-1]))
    return out


def _self_root(target: ast.expr) -> str | None:
    """``x`` for ``self.x``, ``self.x[k]``, ``self.x[k][j]``; None otherwise."""
    while isinstance(target, ast.Subscript):
        target = target.value
    return self_attr(target)
