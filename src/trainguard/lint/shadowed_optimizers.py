"""Functions handed an optimizer that step a global one instead.

``def train_batch(x, y, model, opt, loss_fn): ...; optimizer.step()`` never reads ``opt``: it
steps the module-level ``optimizer`` left over from an earlier cell or run. Where a call hands it
another optimizer (``run(cnn, loss_fn, cnn_opt)`` passing ``cnn_opt`` down to it), the model
trained there gets gradients and no step: its optimizer is never stepped
(PacktPublishing/Modern-Computer-Vision-with-PyTorch-2E#8, ``opt`` passed and ``optimizer``
used). Calls are followed up through the caller's parameters, a few levels; every call that
hands the global itself (or a name assigned from it) is harmless and stays silent.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from trainguard.lint.astutil import walk_local
from trainguard.lint.callgraph import bind_arguments
from trainguard.lint.script import Script

__all__ = ["ShadowedStep", "shadowed_steps"]


@dataclass(frozen=True)
class ShadowedStep:
    """``step`` (``optimizer.step()`` on the global ``stepped``) in ``func``, whose parameter
    ``param`` is never read; ``site`` hands it ``handed``, which nothing steps (``via``: the call
    in ``func``'s caller, when the optimizer was passed down through it)."""

    step: ast.Call
    func: ast.FunctionDef | ast.AsyncFunctionDef
    param: str
    stepped: str
    handed: str
    site: ast.Call
    via: ast.Call | None


def shadowed_steps(script: Script) -> Iterator[ShadowedStep]:
    for func in script.nodes:
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) or \
                not script.has_backward(func):
            continue
        step = _global_step(script, func)
        if step is None:
            continue
        stepped = step.func.value.id  # type: ignore[attr-defined]
        params = _params(func)
        loaded = {n.id for n in walk_local(func) if isinstance(n, ast.Name) and
                  isinstance(n.ctx, ast.Load)}
        for param in params:
            if param in loaded or param == "self":
                continue
            found = next(((handed, site, via) for handed, site, via in
                          _handed(script, func, param, depth=3)
                          if handed != stepped and script.is_optimizer(handed) and
                          not _stepped(script, handed) and
                          not _aliases(script, handed, stepped)), None)
            if found is not None:
                yield ShadowedStep(step, func, param, stepped, *found)
                break


def _params(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    return [a.arg for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]]


def _global_step(script: Script, func: ast.AST) -> ast.Call | None:
    """The one ``name.step()`` in ``func`` on an optimizer the function neither takes nor
    binds: a module-level name."""
    stored = {n.id for n in walk_local(func) if isinstance(n, ast.Name) and
              isinstance(n.ctx, (ast.Store, ast.Del))}
    declared = {g for n in walk_local(func) if isinstance(n, (ast.Global, ast.Nonlocal))
                for g in n.names}
    found = [c for c in walk_local(func) if isinstance(c, ast.Call) and
             isinstance(c.func, ast.Attribute) and c.func.attr == "step" and
             isinstance(c.func.value, ast.Name) and script.is_optimizer(c.func.value.id)]
    if len(found) != 1:
        return None
    name = found[0].func.value.id  # type: ignore[attr-defined]
    if name in stored or name in declared or name in _params(func) or \
            not any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
                    for n in walk_local(script.tree)):  # (a name the module binds)
        return None
    return found[0]


def _handed(script: Script, func: ast.AST, param: str, *, depth: int,
            via: ast.Call | None = None) -> Iterator[tuple[str, ast.Call, ast.Call | None]]:
    """(the caller's name for what is bound to ``param``, the call that binds it at the top,
    the call in between) for each call of ``func``, through callers' own parameters."""
    for site in script.call_sites(func)[:8]:  # type: ignore[arg-type]
        names = _params(func)  # type: ignore[arg-type]
        if names[:1] == ["self"]:
            names = names[1:]
        arg = bind_arguments(names, site).get(param)
        if not isinstance(arg, ast.Name):
            continue
        outer = script.enclosing_function(site)
        if outer is not None and arg.id in _params(outer) and depth > 1 and not any(
                isinstance(n, ast.Name) and n.id == arg.id and isinstance(n.ctx, ast.Store)
                for n in walk_local(outer)):
            yield from _handed(script, outer, arg.id, depth=depth - 1, via=site)
        elif outer is None or arg.id not in _params(outer):
            yield arg.id, site, via


def _stepped(script: Script, key: str) -> bool:
    return any(isinstance(c.func, ast.Attribute) and c.func.attr == "step" and
               script.key(c.func.value) == key for c in script.calls)


def _aliases(script: Script, a: str, b: str) -> bool:
    """One name assigned from the other (``optimizer = cnn_opt``): the same object."""
    return any(isinstance(v, ast.Name) and v.id == y
               for x, y in ((a, b), (b, a)) for v in script.assignments.get(x, []))
