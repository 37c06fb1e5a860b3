"""The train/eval mode a model is in at a point of a script, as far as the code tells."""

from __future__ import annotations

import ast
from typing import Literal

from trainguard.lint.events import Event, builds_module
from trainguard.lint.regions import preceding_events
from trainguard.lint.script import Script

__all__ = ["mode_before"]

Mode = Literal["train", "eval", "unknown"]


def mode_before(script: Script, node: ast.AST, *, _depth: int = 3) -> tuple[Mode, str]:
    """The mode when ``node`` starts and why.

    The events before it in its function (calls of same-file and same-project functions
    followed) are walked in order, keeping the last ``.train()``/``.eval()``; inside a loop, the
    next pass is walked too (the loop's body has run once more), so an ``eval()`` at the end of
    an epoch and a ``train()`` only before the loop are both seen. When the function itself
    says nothing, the mode is the one at its call sites (train at any of them is train; eval
    at every one is eval). At
    the top: a training loop that ran earlier, else a model built earlier in the same scope
    (modules start in train mode) by a same-file class, a zoo constructor, or a class or
    factory of another project file that does not set the mode itself."""
    first = _walk(script, preceding_events(script, node))
    state, reason, trained_at, decided = first
    if decided and state != "train" and script.enclosing_loops(node):
        second = _walk(script, preceding_events(script, node, again=True))
        if second[0] == "train":
            return "train", f"{second[1]}, on the loop's next pass"
    if decided:
        return state, reason
    func = script.enclosing_function(node)
    if func is not None and _depth > 0:
        at_sites = []
        for site in script.call_sites(func):
            mode, why = mode_before(script, site, _depth=_depth - 1)
            if mode == "train":
                return "train", f"{why}; {func.name}() is called at {script.at(site.lineno)}"
            at_sites.append((mode, why, site))
        if at_sites and all(m == "eval" for m, _, _ in at_sites):  # every caller evaluates
            _, why, site = at_sites[0]
            return "eval", f"{why}; {func.name}() is called at {script.at(site.lineno)}"
    if trained_at is not None:
        return "train", f"the model has been in train mode since it was built; " \
                        f"it was trained just before (optimizer step at {script.at(trained_at)})"
    built = _built_before(script, node)
    if built is not None:
        return "train", f"modules start in train mode and the model built at {script.at(built)} " \
                        f"was never switched to eval"
    return "unknown", ""


def _walk(script: Script, evs: list[Event]) -> tuple[Mode, str, int | None, bool]:
    """(mode, why, line of the first optimizer step, whether a mode event decided it)."""
    state: Mode = "unknown"
    reason = ""
    decided = False
    trained_at = None
    for e in evs:
        where = e.place(script) + (
            f", in the call at {script.at(e.via.lineno)}" if e.via is not None
            else "")
        if e.kind == "train":
            reason = f"{e.key} built at {where}" if isinstance(e.node, ast.Assign) else \
                f"{e.key}.train() at {where}"
            state, decided = "train", True
        elif e.kind == "eval":
            state, reason, decided = "eval", f"{e.key}.eval() at {where}", True
        elif e.kind == "mode?":
            state, reason, decided = "unknown", "", True
        elif e.kind == "step" and trained_at is None:
            trained_at = e.line if e.via is None else e.via.lineno
    return state, reason, trained_at, decided


def _built_before(script: Script, node: ast.AST) -> int | None:
    scope = script.enclosing_function(node)
    keys = script.models | script.project_model_keys if script.mode_dependent else script.models
    for key in keys:
        for value in script.assignments.get(key, []):
            if not isinstance(value, ast.Call) or value.lineno >= node.lineno:  # type: ignore
                continue
            if script.enclosing_function(value) is not scope:
                continue
            if builds_module(script, value):
                return value.lineno
            builder = script.model_builders.get(id(value)) if script.mode_dependent else None
            if builder is not None and builder.mode_dependent and not builder.sets_mode:
                return value.lineno  # a class or factory of another project file
    return None
