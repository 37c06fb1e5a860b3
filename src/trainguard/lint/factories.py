"""The train/eval mode of a module a statement binds: ``model = Net().eval()``,
``model = build().to(device).eval()``, ``encoder = Encoder.from_pretrained(path)``.

``nn.Module.eval()`` and ``train(mode)`` return the module itself, so the mode set at the end of
the call chain is the mode of what is bound. A factory of the file (a function, or a
classmethod/staticmethod called on its class) hands back the mode its returns give: ``return
model.eval()``, ``model.eval()`` then ``return model``, or a module it has just built (modules
start in train mode: ``nn.Module.__init__`` sets ``training = True``,
https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.train).
"""

from __future__ import annotations

import ast
from typing import Literal

from trainguard.lint.astutil import dotted, mode_switch, walk_local
from trainguard.lint.callgraph import RETURNS_SELF
from trainguard.lint.script import Script

__all__ = ["bound_mode", "factory_of"]

Mode = Literal["train", "eval"]


def _chain_mode(value: ast.AST) -> tuple[Mode | None, ast.AST, bool]:
    """The mode the outermost ``.eval()``/``.train(...)`` of a chain of calls that return their
    module sets (``.to(device)`` passed over), the expression the chain starts from, and whether
    the chain switches the mode at all (``.train(flag)``: it does, to a mode not known)."""
    node, mode, decided = value, None, False
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in RETURNS_SELF:
        attr = node.func.attr
        if not decided and attr in ("train", "eval"):
            decided = True  # (the outermost switch is the one that holds)
            switch = mode_switch(node)
            mode = switch if switch in ("train", "eval") else None
        node = node.func.value
    return mode, node, decided


def factory_of(script: Script, call: ast.AST) -> ast.FunctionDef | None:
    """The function of the file that ``call`` runs when it builds something: ``make(...)`` or
    ``Cls.from_pretrained(...)`` (a classmethod or staticmethod called on a class of the
    file)."""
    if not isinstance(call, ast.Call):
        return None
    f = call.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
            f.value.id in script.classes:
        for item in script.classes[f.value.id].body:
            if isinstance(item, ast.FunctionDef) and item.name == f.attr and any(
                    dotted(d) in ("classmethod", "staticmethod") for d in item.decorator_list):
                return item
        return None
    if dotted(f) in script.classes:
        return None  # (a class built: its __init__ returns nothing)
    target = script.callee(call)
    return target if isinstance(target, ast.FunctionDef) else None


def bound_mode(script: Script, value: ast.AST, *, _depth: int = 2) -> Mode | None:
    """The mode of the module ``value`` gives, when the code says it; else None."""
    mode, start, switched = _chain_mode(value)
    if switched:
        return mode
    func = factory_of(script, start) if _depth > 0 else None
    if func is None:
        return None
    modes = {_returned_mode(script, func, r, _depth) for r in walk_local(func)
             if isinstance(r, ast.Return)}
    return modes.pop() if len(modes) == 1 else None


def _returned_mode(script: Script, func: ast.FunctionDef, ret: ast.Return,
                   depth: int) -> Mode | None:
    if ret.value is None:
        return None
    mode, start, switched = _chain_mode(ret.value)
    if switched:
        return mode
    if not isinstance(start, ast.Name):
        return _built_mode(script, func, start, depth)
    # model.eval() (or an assignment that sets the mode) in the function's own body, before
    # ``return model``: the last one decides (one under a branch leaves the mode unknown)
    last: Mode | None = None
    for stmt in func.body:
        if stmt.lineno >= ret.lineno:
            break
        chain = _chain_mode(stmt.value) if isinstance(stmt, ast.Expr) else None
        if chain is not None and chain[2] and dotted(chain[1]) == start.id:
            last = chain[0]
        elif isinstance(stmt, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == start.id for t in stmt.targets):
            last = _built_mode(script, func, stmt.value, depth)
        elif any(isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and
                 n.value.id == start.id and n.attr in ("train", "eval")
                 for n in ast.walk(stmt)):
            last = None  # (a mode set under a branch)
    return last


def _built_mode(script: Script, func: ast.FunctionDef, value: ast.AST,
                depth: int) -> Mode | None:
    """``Net(...)``, ``cls(...)`` in a classmethod of a module class: a fresh module, in train
    mode; a chain or factory that says its mode: that mode."""
    from trainguard.lint.events import builds_module

    mode = bound_mode(script, value, _depth=depth - 1)
    value = _chain_mode(value)[1]  # (Net().to(device): a fresh Net)
    if mode is not None or not isinstance(value, ast.Call):
        return mode
    if builds_module(script, value):
        return "train"
    if isinstance(value.func, ast.Name) and value.func.id == "cls" and \
            func.args.args and func.args.args[0].arg == "cls":
        owner = script.enclosing_class(func)
        if owner is not None and any(isinstance(b, ast.FunctionDef) and b.name == "forward"
                                     for b in owner.body):
            return "train"
    return None
