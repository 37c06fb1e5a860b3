"""Submodules that ``forward`` never runs: built with parameters in ``__init__``, handed to the
optimizer with the rest of ``model.parameters()``, and never given a gradient ("this error
indicates that your module has parameters that were not used in producing loss" under DDP:
https://github.com/tianzhi0549/FCOS/issues/217, https://github.com/pytorch/pytorch/issues/41324).

A submodule counts as unused when its attribute is named nowhere in the file but where
``__init__`` assigns it: not in ``forward``, another method, a subclass, the training code
(``model.head(x)``), a string (``getattr(self, "head")``), nor reached through the module's own
children (``self.children()``, ``self._modules``, ``vars(self)``). Only an assignment that
``__init__`` always runs counts (one under ``if cfg.aux_head:`` is the config's choice), only in
a class that this file builds and trains.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from trainguard.lint.astutil import dotted
from trainguard.lint.cuts import parametric
from trainguard.lint.script import Script

__all__ = ["UnusedSubmodule", "unused_submodules", "plain_module", "GENERIC_REACH"]

# Ways a module reaches its submodules without naming them.
GENERIC_REACH = {"children", "named_children", "modules", "named_modules", "_modules", "__dict__",
            "parameters", "named_parameters", "state_dict"}


@dataclass(frozen=True, slots=True)
class UnusedSubmodule:
    cls: ast.ClassDef
    attr: str
    assign: ast.Assign


def unused_submodules(script: Script) -> list[UnusedSubmodule]:
    if "backward" not in script.source or "forward" not in script.source:
        return []
    built = {dotted(n.func) for n in script.calls}
    named: dict[str, int] | None = None
    out = []
    for name, cls in script.classes.items():
        methods = {b.name: b for b in cls.body if isinstance(b, ast.FunctionDef)}
        init = methods.get("__init__")
        if init is None or "forward" not in methods or name not in built or \
                not plain_module(script, cls):
            continue
        for stmt in init.body:  # statements __init__ always runs
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
                continue
            t = stmt.targets[0]
            if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and
                    t.value.id == "self"):
                continue
            named = named if named is not None else _attribute_counts(script)
            if named.get(t.attr, 0) == 1 and _builds_module(script, stmt.value) and \
                    not _reaches_generically(cls, init):
                out.append(UnusedSubmodule(cls, t.attr, stmt))
    return out


def _builds_module(script: Script, value: ast.AST) -> bool:
    """A layer with parameters, or a same-file factory that returns one
    (``self.head = make_head(dim)``)."""
    if parametric(script, value, 4):
        return True
    func = script.callee(value) if isinstance(value, ast.Call) else None
    rets = [r.value for r in ast.walk(func) if isinstance(r, ast.Return)] if func else []
    return bool(rets) and all(r is not None and parametric(script, r, 4) for r in rets)


def _attribute_counts(script: Script) -> dict[str, int]:
    """How often each name appears as an attribute or inside a string constant."""
    counts: dict[str, int] = {}
    for n in script.nodes:
        if isinstance(n, ast.Attribute):
            counts[n.attr] = counts.get(n.attr, 0) + 1
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            for word in set(n.value.replace(".", " ").split()):
                counts[word] = counts.get(word, 0) + 2
    return counts


def plain_module(script: Script, cls: ast.ClassDef, depth: int = 4) -> bool:
    """Derives from ``nn.Module`` directly or through classes of this file only: a base from
    elsewhere might run the submodule in a ``forward`` this file cannot see."""
    if depth == 0 or not cls.bases:
        return False
    for b in cls.bases:
        q = script.qualname(b) or dotted(b) or ""
        if q in ("torch.nn.Module", "torch.nn.modules.module.Module"):
            continue
        base = script.classes.get(dotted(b) or "")
        if base is None or not plain_module(script, base, depth - 1):
            return False
    return True


def _reaches_generically(cls: ast.ClassDef, init: ast.FunctionDef) -> bool:
    init_nodes = {id(n) for n in ast.walk(init)}
    for n in ast.walk(cls):
        if id(n) in init_nodes:
            continue
        if isinstance(n, ast.Attribute) and n.attr in GENERIC_REACH:
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and \
                n.func.id in ("vars", "getattr", "setattr"):
            return True
    return False
