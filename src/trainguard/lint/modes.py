"""The train/eval mode a model is in at a point of a script, as far as the file tells."""

from __future__ import annotations

import ast
from typing import Literal

from trainguard.lint.astutil import dotted
from trainguard.lint.regions import preceding_events
from trainguard.lint.script import Script

__all__ = ["mode_before"]

Mode = Literal["train", "eval", "unknown"]


def mode_before(script: Script, node: ast.AST) -> tuple[Mode, str]:
    """The mode when ``node`` starts and why: the last ``.train()``/``.eval()`` before it in its
    function or module (same-file calls followed), else a training loop that ran earlier, else
    a model built earlier in the same scope (modules start in train mode) by a same-file class,
    a zoo constructor, or a class or factory of another project file that does not set the mode
    itself."""
    state: Mode = "unknown"
    reason = ""
    trained_at = None
    for e in preceding_events(script, node):
        line = (e.via or e.node).lineno  # type: ignore[attr-defined]
        where = f"line {e.node.lineno}" + (  # type: ignore[attr-defined]
            f", in the call at line {e.via.lineno}" if e.via is not None else "")
        if e.kind == "train":
            state, reason = "train", f"{e.key}.train() at {where}"
        elif e.kind == "eval":
            state, reason = "eval", f"{e.key}.eval() at {where}"
        elif e.kind == "mode?":
            state, reason = "unknown", ""
        elif e.kind == "step" and trained_at is None:
            trained_at = line
    if state != "unknown" or reason:
        return state, reason
    if trained_at is not None:
        return "train", f"the model has been in train mode since it was built; " \
                        f"it was trained just before (optimizer step at line {trained_at})"
    built = _built_before(script, node)
    if built is not None:
        return "train", f"modules start in train mode and the model built at line {built} " \
                        f"was never switched to eval"
    return "unknown", ""


def _built_before(script: Script, node: ast.AST) -> int | None:
    scope = script.enclosing_function(node)
    module_classes = {n for n, c in script.classes.items()
                      if any(isinstance(b, ast.FunctionDef) and b.name == "forward"
                             for b in c.body)}
    keys = script.models | script.project_model_keys if script.mode_dependent else script.models
    for key in keys:
        for value in script.assignments.get(key, []):
            if not isinstance(value, ast.Call) or value.lineno >= node.lineno:  # type: ignore
                continue
            if script.enclosing_function(value) is not scope:
                continue
            q = script.call_qualname(value) or ""
            if dotted(value.func) in module_classes or q.startswith(
                    ("torchvision.models.", "timm.create_model")):
                return value.lineno
            builder = script.model_builders.get(id(value)) if script.mode_dependent else None
            if builder is not None and builder.mode_dependent and not builder.sets_mode:
                return value.lineno  # a class or factory of another project file
    return None
