"""A new layer frozen together with the model it was attached to.

``model.fc = nn.Linear(512, 10)`` followed, in the same function, by a loop that sets
``requires_grad = False`` on every parameter of ``model.parameters()`` (or by
``model.requires_grad_(False)``) freezes the new head as
well: nothing of the model requires grad, and the file never turns any parameter back on, so
the optimizer has nothing to train and ``backward()`` fails with "element 0 of tensors does not
require grad" (https://pytorch.org/tutorials/beginner/finetuning_torchvision_models_tutorial.html
freezes first, then replaces the head). Used by TG205.

Silent when the layer is attached after the freeze, when the file sets ``requires_grad`` back to
true anywhere (an unfreeze of the head or of the last blocks), when the attached layer has no
parameters (``model.fc = nn.Identity()``: a feature extractor), and when an optimizer of the file
is given the parameters of another module (a separate head trained on the frozen features).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from trainguard.lint.astutil import dotted, is_false, walk_local
from trainguard.lint.cuts import parametric
from trainguard.lint.frozen import freezing_calls, freezing_loops
from trainguard.lint.script import Script

__all__ = ["FrozenHead", "frozen_heads"]


@dataclass(frozen=True, slots=True)
class FrozenHead:
    """``attach`` (``model.fc = nn.Linear(...)``) runs before ``freeze`` (a loop over
    ``model.parameters()``, or ``model.requires_grad_(False)``) froze all of ``model``."""

    model: str
    attach: ast.Assign
    freeze: ast.AST


def frozen_heads(script: Script) -> list[FrozenHead]:
    if "requires_grad" not in script.source or not script.may_reach("backward") or \
            _unfreezes(script):
        return []
    out = []
    for loop, model in [*freezing_loops(script), *freezing_calls(script)]:
        func = script.enclosing_function(loop) or script.tree  # a notebook's cells: the module
        attached = [n for n in walk_local(func) if isinstance(n, ast.Assign) and
                    len(n.targets) == 1 and isinstance(n.targets[0], ast.Attribute) and
                    dotted(n.targets[0].value) == model]
        before = [a for a in attached if a.lineno < loop.lineno and parametric(script, a.value, 4)]
        after = {dotted(a.targets[0]) for a in attached if a.lineno > loop.lineno}
        before = [a for a in before if dotted(a.targets[0]) not in after]
        if before and not _other_module_trained(script, model):
            out.append(FrozenHead(model, before[-1], loop))
    return out


def _unfreezes(script: Script) -> bool:
    """Anything set to require grad again: ``p.requires_grad = True``, ``requires_grad_()``,
    ``requires_grad = flag`` (a value the file does not fix)."""
    for node in script.nodes:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Attribute) and t.attr == "requires_grad"
                for t in node.targets) and not is_false(node.value):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "requires_grad_" and \
                (not node.args or not is_false(node.args[0])):
            return True
    return False


def _other_module_trained(script: Script, model: str) -> bool:
    """Some ``X.parameters()`` of the file names a module other than ``model`` or its parts."""
    for node in script.nodes:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("parameters", "named_parameters"):
            key = script.key(node.func.value)
            if key is None or not (key == model or key.startswith(model + ".")):
                return True
    return False
