"""What forward hooks store: on ``self``, or into a container of the file.

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
``self._saver("pool")``). File-wide (:func:`registrations`), a hook's tensor parameters are
the hooked module's output (:func:`hooked_parameter`), and a container that only hooks fill
(``activation[name] = output.detach()``) holds what they store (:func:`container_stores`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from trainguard.lint.astutil import dotted, parent, self_attr, walk_local
from trainguard.lint.script import Script

__all__ = ["HookStore", "hook_stores", "Registration", "registrations", "hooked_parameter",
           "container_stores"]

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
            params = _hook_params(hook, methods)
            for attr, value in _stores(hook):
                out.setdefault(attr, []).append(
                    HookStore(attr, value, hook, params, call.func.value, call))
    cls._tg_hook_stores = out  # type: ignore[attr-defined]
    return out


def _hook_params(hook: ast.AST, methods: dict[str, ast.FunctionDef]) -> frozenset[str]:
    """The names a forward hook gives its inputs and output: its parameters after the module
    (and after ``self`` for a method of the class), which carries no graph."""
    args = [a.arg for a in hook.args.posonlyargs + hook.args.args]  # type: ignore[attr-defined]
    if args and args[0] == "self" and isinstance(hook, ast.FunctionDef) and \
            hook.name in methods:
        args = args[1:]
    return frozenset(args[1:])


def _hook_function(arg: ast.expr, method: ast.AST,
                   methods: dict[str, ast.FunctionDef]) -> ast.FunctionDef | ast.Lambda | None:
    """The function a registration hands over: ``self._hook``, a nested ``def``, a ``lambda``,
    or the one a factory call returns (``self._saver(name)``, ``make_hook(name)``)."""
    if isinstance(arg, ast.Lambda):
        return arg
    if self_attr(arg) in methods:
        return methods[self_attr(arg)]  # type: ignore[index]
    if isinstance(arg, ast.Name):
        return next((n for n in walk_local(method) if isinstance(n, ast.FunctionDef) and
                     n.name == arg.id), None) or methods.get(arg.id)
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


@dataclass(frozen=True, slots=True)
class Registration:
    """``hooked.register_forward_hook(...)`` (``register``) hands over ``hook``, whose
    ``params`` carry tensors (the hooked module's arguments and output)."""

    hook: ast.FunctionDef | ast.Lambda
    params: frozenset[str]
    hooked: ast.expr
    register: ast.Call


def registrations(script: Script) -> list[Registration]:
    """The forward hooks the file registers, wherever: a function of the file, a ``def`` in the
    registering function, a ``lambda``, a method (``self._hook``), or what a hook factory of
    the file returns (``save("mid")``)."""
    memo = script.__dict__.get("_tg_registrations")
    if memo is not None:
        return memo
    out = []
    if any(r in script.source for r in _REGISTER):
        for call in script.calls:
            if not (isinstance(call.func, ast.Attribute) and call.func.attr in _REGISTER and
                    call.args):
                continue
            scope = script.enclosing_function(call)
            cls = script.enclosing_class(call)
            methods = {b.name: b for b in cls.body if isinstance(b, ast.FunctionDef)} \
                if cls is not None else {}
            top = {name: funcs[0] for name, funcs in script.functions.items()
                   if len(funcs) == 1 and isinstance(funcs[0], ast.FunctionDef) and
                   script.enclosing_function(funcs[0]) is None and
                   script.enclosing_class(funcs[0]) is None}
            hook = _hook_function(call.args[0], scope or script.tree, {**top, **methods})
            if hook is None:
                continue
            out.append(Registration(hook, _hook_params(hook, methods), call.func.value, call))
    script.__dict__["_tg_registrations"] = out
    return out


def hooked_parameter(script: Script, name: ast.Name) -> ast.expr | None:
    """The module whose forward hook ``name`` is a tensor parameter of (its output or
    arguments), or None."""
    n: ast.AST | None = name
    while (n := parent(n)) is not None and \
            not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        pass
    if n is None:
        return None
    return next((r.hooked for r in registrations(script)
                 if r.hook is n and name.id in r.params), None)


def container_stores(script: Script, name: str, scope: ast.AST) -> list[ast.expr] | None:
    """What the file's forward hooks store into the container ``name`` bound in ``scope`` (the
    module, or a function around the hooks: ``features = {}``), when hooks are all that
    ever fill it and every binding of it is an empty container; None otherwise."""
    binds = [n for n in walk_local(scope) if isinstance(n, ast.Name) and n.id == name and
             isinstance(n.ctx, ast.Store)]
    if not binds or not all(isinstance(parent(b), ast.Assign) and
                            _empty_container(parent(b).value) for b in binds):  # type: ignore
        return None
    hooks = {id(r.hook): r.hook for r in registrations(script)}
    found, other = [], False
    for node in ast.walk(scope):
        store = _name_store(node, name)
        if store is None:
            continue
        owner: ast.AST | None = node
        while (owner := parent(owner)) is not None and id(owner) not in hooks:
            pass
        if owner is None:
            other = True  # filled elsewhere too: what it holds is not the hooks' alone
        elif not any(isinstance(b, ast.Name) and b.id == name and isinstance(b.ctx, ast.Store)
                     for b in ast.walk(owner)):
            found.append(store)
    return None if other or not found else found


def _name_store(node: ast.AST, name: str) -> ast.expr | None:
    """The value ``node`` stores into the container ``name``: ``name[k] = v``,
    ``name.append(v)``, ``name[k].append(v)``."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
            isinstance(node.targets[0], ast.Subscript) and _name_root(node.targets[0]) == name:
        return node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in _STORE_CALLS and node.args and _name_root(node.func.value) == name:
        return node.args[-1]
    return None


def _name_root(target: ast.expr) -> str | None:
    while isinstance(target, ast.Subscript):
        target = target.value
    return target.id if isinstance(target, ast.Name) else None


def _empty_container(value: ast.AST) -> bool:
    """``{}``, ``[]``, ``dict()``, ``list()``, ``defaultdict(list)``, ``OrderedDict()``."""
    if isinstance(value, (ast.Dict, ast.List)):
        return not (value.keys if isinstance(value, ast.Dict) else value.elts)
    return isinstance(value, ast.Call) and not value.keywords and \
        (dotted(value.func) or "").rsplit(".", 1)[-1] in ("dict", "list", "OrderedDict",
                                                           "defaultdict") and \
        (not value.args or (dotted(value.func) or "").endswith("defaultdict"))
