"""An evaluation that puts only a part of its model in eval mode.

``self.model.backbone.eval()`` before a validation loop that runs ``self.model(x)`` switches the
backbone alone: the head's Dropout (or BatchNorm) still acts as in training, so two validation
passes over the same data disagree. ``nn.Module.eval`` sets the mode of the module it is called
on and of its children only.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from trainguard.lint.callgraph import self_assigned
from trainguard.lint.events import Event, events
from trainguard.lint.script import Script

__all__ = ["PartialEval", "partial_eval"]


@dataclass(frozen=True, slots=True)
class PartialEval:
    """``parts`` (the ``eval()`` events, in the region's order) switch pieces of ``model``
    (``self.model``) while its attributes ``left`` (``head``) hold mode-dependent modules."""

    model: str
    parts: list[Event]
    left: list[str]


def partial_eval(script: Script, body: list[ast.stmt], forwards: list[ast.Call],
                 mode_dependent: Callable[[ast.expr], bool]) -> PartialEval | None:
    """The partial switch in an evaluation ``body`` whose ``forwards`` run a model of a class
    of this file: every mode change there is an ``eval()`` of an attribute of that model (or
    deeper), none of the model itself nor a ``train()``, and an attribute of its class that no
    such ``eval()`` reaches holds a module for which ``mode_dependent`` holds. None otherwise
    (the whole model switched, every mode-dependent part switched, an unknown class)."""
    modes = [e for e in events(script, body) if e.kind in ("train", "eval", "mode?")]
    if not modes or any(e.kind == "train" or e.key is None for e in modes):
        return None
    for call in forwards:
        model = script.key(call.func)
        if model is None or not all(e.key.startswith(model + ".")  # type: ignore[union-attr]
                                    for e in modes):
            continue
        reached = {e.key[len(model) + 1:].split(".")[0] for e in modes}  # type: ignore[index]
        left = sorted(_mode_dependent_attributes(script, call.func, mode_dependent) - reached)
        if left:
            return PartialEval(model, modes, left)
    return None


def _mode_dependent_attributes(script: Script, model: ast.expr,
                               mode_dependent: Callable[[ast.expr], bool]) -> set[str]:
    """The attributes (``self.head = nn.Sequential(...)``) of the one module class of this
    file that ``model`` is built from, whose value holds a mode-dependent module."""
    refs = script.graph.types(model)
    if len(refs) != 1 or refs[0].script is not script or \
            not script.graph.is_module_class(refs[0]):
        return set()
    cls = refs[0].node
    names = {n.attr for n in ast.walk(cls) if isinstance(n, ast.Attribute) and
             isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name) and
             n.value.id == "self"}
    return {name for name in names if any(map(mode_dependent, self_assigned(cls, name)))}

