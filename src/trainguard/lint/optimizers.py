"""Which modules an optimizer holds the parameters of, and which zeroings clear its gradients.

``torch.optim.Adam(list(enc.parameters()) + list(dec.parameters()))`` holds ``enc`` and ``dec``;
``enc.zero_grad()`` clears only ``enc``'s gradients, so ``dec``'s keep adding up over every step
(https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.zero_grad).
Answers are in the file's keys (``self.encoder``, ``netS``); an optimizer built from anything
the file cannot read (a list built elsewhere, a helper) holds unknown modules, and every
zeroing is then taken to clear it.
"""

from __future__ import annotations

import ast

from trainguard.lint.script import Script

__all__ = ["held_modules", "cleared", "zero_covers"]

_PARAM_CALLS = ("parameters", "named_parameters")


def held_modules(script: Script, key: str | None, at: ast.AST | None = None
                 ) -> frozenset[str] | None:
    """The keys of the modules whose parameters optimizer ``key`` holds, or None if unknown.
    With ``at`` (a use of a plain local name), only the optimizers that name is bound to in the
    function holding ``at``, when it binds it there (``opt`` in ``pretrain()`` and in
    ``restore()`` are two optimizers)."""
    if not key:
        return None
    scope = script.enclosing_function(at) if at is not None and "." not in key else None
    memo = script.__dict__.setdefault("_tg_held", {})
    if (key, id(scope)) not in memo:
        memo[(key, id(scope))] = _held(script, key, scope)
    return memo[(key, id(scope))]


def _held(script: Script, key: str, scope: ast.AST | None) -> frozenset[str] | None:
    found: set[str] = set()
    values = script.assignments.get(key, [])
    if scope is not None:
        local = [v for v in values if script.enclosing_function(v) is scope]
        values = local or values
    if not values:
        return None
    for value in values:
        if not isinstance(value, ast.Call):
            return None
        params = value.args[0] if value.args else next(
            (k.value for k in value.keywords if k.arg == "params"), None)
        if params is None:
            return None
        keys = _modules_in(script, params, depth=2)
        if keys is None:
            return None
        found |= keys
    return frozenset(found) or None


def _modules_in(script: Script, expr: ast.AST, depth: int) -> set[str] | None:
    """Keys of ``X`` in every ``X.parameters()`` under ``expr``; None when some part of the
    parameter list is a value the file does not show (a name bound elsewhere)."""
    out: set[str] = set()
    for sub in ast.walk(expr):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                sub.func.attr in _PARAM_CALLS:
            k = script.key(sub.func.value)
            if k is None:
                return None
            out.add(_stored_as(script, sub.func.value) or k)
    if out:
        return out
    if isinstance(expr, ast.Name) and depth > 0:
        values = script.assignments.get(expr.id, [])
        if len(values) == 1:
            return _modules_in(script, values[0], depth - 1)
    return None


def _stored_as(script: Script, name: ast.AST) -> str | None:
    """``self.discriminator`` for the argument ``discriminator`` of a method that stores it so
    (``self.discriminator = discriminator``): the key the rest of the class uses for it."""
    if not isinstance(name, ast.Name):
        return None
    func = script.enclosing_function(name)
    if func is None or name.id not in {a.arg for a in func.args.args + func.args.kwonlyargs}:
        return None
    stored = {script.key(stmt.targets[0]) for stmt in ast.walk(func)
              if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
              and isinstance(stmt.value, ast.Name) and stmt.value.id == name.id
              and isinstance(stmt.targets[0], ast.Attribute)}
    return stored.pop() if len(stored) == 1 else None


def cleared(script: Script, zero_key: str | None, step_key: str | None) -> frozenset[str] | None:
    """Which of the modules optimizer ``step_key`` holds a zeroing on ``zero_key`` (a model, an
    optimizer, ``*`` for ``p.grad = None``) clears: None for all of them. Unknown means all:
    only a zeroing shown to miss some held module clears less (a part of the held modules, a
    sub-module of one, or a model that another optimizer holds)."""
    held = held_modules(script, step_key)
    if held is None or zero_key in (None, "*") or zero_key == step_key:
        return None
    if zero_key in held:
        return frozenset({zero_key})
    if any(zero_key.startswith(h + ".") for h in held):
        return frozenset()  # a sub-module of a held module: the rest keeps its gradients
    if any(h.startswith(zero_key + ".") for h in held):
        return None  # the whole model around the held sub-modules
    if script.is_optimizer(zero_key):
        other = held_modules(script, zero_key)
        return None if other is None else held & other
    for k in script.optimizers:
        if k != step_key and zero_key in (held_modules(script, k) or ()):
            return frozenset()  # another optimizer's model (a GAN's critic)
    return None


def zero_covers(script: Script, zero_keys: list[str | None], step_key: str | None) -> bool:
    """Whether the zeroings on ``zero_keys`` together clear every gradient that optimizer
    ``step_key`` applies."""
    held = held_modules(script, step_key)
    done: set[str] = set()
    for z in zero_keys:
        c = cleared(script, z, step_key)
        if c is None:
            return True
        done |= c
    return held is not None and held <= done
