"""Models a script never switches out of train mode.

``nn.Module.__init__`` sets ``training = True``; only ``eval()``/``train(False)`` on the model or
on a module holding it changes that. A network the file builds, never trains, and never hands to
anything that could switch it (no ``eval()``/``train()`` on any name bound to it, no function,
container or parent module that receives it) runs every forward in train mode: a frozen feature
extractor scored under ``no_grad`` (FID's Inception network, sangwoomo/FreezeD#3) keeps Dropout on
and normalizes with batch statistics, updating BatchNorm's running statistics as it goes.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from trainguard.lint.astutil import dotted, parent
from trainguard.lint.events import builds_module
from trainguard.lint.project import MODE_DEPENDENT
from trainguard.lint.regions import disabled_here
from trainguard.lint.script import Script

__all__ = ["Untouched", "never_switched"]

# attribute reads of a model that can change its mode, or hand its modules to other code
_SWITCHES = frozenset({"eval", "train", "apply", "modules", "named_modules", "children",
                       "named_children", "training"})
_PARAMS = frozenset({"parameters", "named_parameters"})


@dataclass(frozen=True, slots=True)
class Untouched:
    """The model a forward runs: ``key`` as the forward names it, built at ``built``."""

    key: str
    built: ast.Call


def never_switched(script: Script, call: ast.Call) -> Untouched | None:
    """The model ``call`` runs (``self.inception(x)``), when the file builds it with
    mode-dependent modules, never switches its mode, never trains it, and runs every one of
    its forwards with grad disabled; else None (unknown counts as None)."""
    f = call.func.value if isinstance(call.func, ast.Attribute) and \
        call.func.attr == "forward" else call.func
    key = script.key(f)
    if not key or key == "self":
        return None
    found = _aliases(script, key)
    if found is None:
        return None
    aliases, builds, handed = found
    if not builds or not all(_mode_dependent(script, b) for b in builds):
        return None
    if any(script.graph.in_module_class(node) for node in _stores(script, aliases)):
        return None  # a child of a module: the parent's eval() reaches it
    for node in script.nodes:
        if isinstance(node, (ast.Name, ast.Attribute)) and script.key(node) in aliases and \
                not _harmless(script, node, aliases, handed):
            return None
    return Untouched(key, builds[0])


def _aliases(script: Script, key: str) -> tuple[set[str], list[ast.Call], set[int]] | None:
    """Every key bound to the model, the calls that build it, and the constructor calls that
    hand it to a class storing it on ``self``; None when some binding is not one of these."""
    aliases, builds, handed = {key}, [], set()
    frontier = [key]
    while frontier:
        k = frontier.pop()
        values = script.assignments.get(k, [])
        if not values:
            return None
        for v in values:
            if isinstance(v, ast.Call) and builds_module(script, v):
                builds.append(v)
                continue
            func = script.enclosing_function(v)
            if not (isinstance(v, ast.Name) and func is not None and func.name == "__init__"):
                return None
            given = script.graph.parameter_values(func, v.id)  # self.x = x
            if not given:
                return None
            for g in given:
                gk = script.key(g)
                if gk is None:
                    return None
                site = parent(g)
                if isinstance(site, ast.keyword):
                    site = parent(site)
                handed.add(id(site))
                if gk not in aliases:
                    aliases.add(gk)
                    frontier.append(gk)
        if len(aliases) > 6:
            return None
    return aliases, builds, handed


def _harmless(script: Script, node: ast.AST, aliases: set[str], handed: set[int]) -> bool:
    """``node`` (a name bound to the model) is a binding already followed, a forward under
    no_grad, a read that changes nothing, or the hand-over to the class that stores it."""
    up = parent(node)
    if isinstance(getattr(node, "ctx", None), ast.Store):
        return True
    if isinstance(up, ast.Assign) and all(script.key(t) in aliases for t in up.targets):
        return True
    if isinstance(up, ast.Tuple) and isinstance(parent(up), ast.Assign):
        return True  # self.a, self.b = a, b: followed by _aliases
    if isinstance(up, ast.Call) and up.func is node:
        return disabled_here(script, up, script.enclosing_function(up))
    if isinstance(up, ast.keyword):
        up = parent(up)
    if isinstance(up, ast.Call) and id(up) in handed:
        return True
    if isinstance(up, ast.Attribute) and up.value is node:
        if up.attr in _SWITCHES:
            return False
        if up.attr == "forward":
            call = parent(up)
            return isinstance(call, ast.Call) and \
                disabled_here(script, call, script.enclosing_function(call))
        if up.attr in _PARAMS:
            return _iterated(parent(up))
        return True  # inception.to(device), .named_buffers(), .state_dict()
    return False


def _iterated(call: ast.AST) -> bool:
    """``call`` (``net.parameters()``) is only iterated over by a loop or a comprehension
    (freezing its parameters, counting them), not handed on (to an optimizer, a list)."""
    up = parent(call)
    return isinstance(up, (ast.For, ast.comprehension)) and up.iter is call


def _stores(script: Script, aliases: set[str]) -> list[ast.AST]:
    return [v for k in aliases for v in script.assignments.get(k, [])]


def _mode_dependent(script: Script, build: ast.Call) -> bool:
    """The class or zoo constructor ``build`` calls holds Dropout or BatchNorm (the class's own
    text, or that of a class of the file it builds)."""
    cls = script.classes.get(dotted(build.func) or "")
    if cls is None:
        return True  # a zoo model (builds_module admits no other)
    texts = [script.segment(cls) or ""]
    for sub in ast.walk(cls):
        if isinstance(sub, ast.Call) and (inner := script.classes.get(dotted(sub.func) or "")):
            if inner is not cls:
                texts.append(script.segment(inner) or "")
    return any(MODE_DEPENDENT.search(t) for t in texts)
