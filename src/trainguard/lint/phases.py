"""Loops shared by the phases of a run: one function trains or evaluates as its caller says.

``run_epoch(loader, phase)`` (``_shared_loop(bags, "val")``, ``step_all(batches,
train=False)``) runs the forward for every phase and the backward and optimizer step only under
a test of that argument (``if phase == "train":``). A call that passes a literal for which every
such test skips the backward and the step runs the function as an evaluation. When the function
calls ``model.train()`` unconditionally before its forward, that evaluation runs in train mode
(Franblueee/torchmil#27: the shared loop switched to train mode for validation and test too).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from trainguard.lint.astutil import mode_switch, parent, walk_local
from trainguard.lint.callgraph import bind_arguments, defaults
from trainguard.lint.consts import truth
from trainguard.lint.events import events
from trainguard.lint.script import Script

__all__ = ["PhaseEval", "phase_evaluations"]

Func = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True, slots=True)
class PhaseEval:
    """``func`` calls ``key.train()`` (``switch``) for every phase, runs ``key``'s forward
    (``forward``), and ``sites`` call it with arguments that skip every backward and step."""

    func: Func
    switch: ast.Call
    key: str
    forward: ast.Call
    sites: list[ast.Call]


def phase_evaluations(script: Script) -> list[PhaseEval]:
    """Each function of the file that switches a model to train mode whatever its phase
    argument says, and whose calls include evaluations by that argument."""
    out = []
    for funcs in script.functions.values():
        for func in funcs:
            found = _phase_evaluation(script, func)
            if found is not None:
                out.append(found)
    return out


def _phase_evaluation(script: Script, func: Func) -> PhaseEval | None:
    switch = next((s.value for s in func.body if isinstance(s, ast.Expr) and
                   isinstance(s.value, ast.Call) and mode_switch(s.value) == "train" and
                   not s.value.args and not s.value.keywords), None)
    key = script.key(switch.func.value) if switch is not None else None  # type: ignore[union-attr]
    if switch is None or key is None or not script.is_model(key):
        return None
    forward = next((c for c in walk_local(func) if isinstance(c, ast.Call) and
                    c.lineno > switch.lineno and script.key(c.func) == key), None)
    updates = [e.via or e.node for e in events(script, func.body)
               if e.kind in ("backward", "step")]
    if forward is None or not updates:
        return None
    names = [a.arg for a in func.args.posonlyargs + func.args.args]
    sites = []
    for site in script.call_sites(func):
        if isinstance(parent(site), ast.Expr):
            continue  # called for its effect alone: no result to evaluate
        env = _literals(func, names, site)
        if env and all(_skipped(func, node, env) for node in updates):
            sites.append(site)
    return PhaseEval(func, switch, key, forward, sites) if sites else None


def _literals(func: Func, names: list[str], site: ast.Call) -> dict[str, ast.expr]:
    """Parameter -> the literal the call binds it to (the argument, else the default)."""
    if names and names[0] in ("self", "cls") and isinstance(site.func, ast.Attribute):
        names = names[1:]
    bound = {**defaults(func), **bind_arguments(names, site)}
    a = func.args
    for arg, default in zip(a.kwonlyargs, a.kw_defaults):
        bound.setdefault(arg.arg, default)  # type: ignore[arg-type]
    return {k: v for k, v in bound.items() if isinstance(v, ast.Constant)}


def _skipped(func: Func, node: ast.AST, env: dict[str, ast.expr]) -> bool:
    """An ``if`` of ``func`` around ``node`` that the bound literals decide against it."""
    n: ast.AST | None = node
    while n is not None and n is not func:
        up = parent(n)
        if isinstance(up, (ast.If, ast.IfExp)) and n is not up.test:
            taken = truth(up.test, env=env)
            if taken is not None and taken != (n in _branch(up, True)):
                return True
        n = up
    return False


def _branch(node: ast.If | ast.IfExp, taken: bool) -> list[ast.AST]:
    if isinstance(node, ast.IfExp):
        return [node.body if taken else node.orelse]
    return list(node.body if taken else node.orelse)
