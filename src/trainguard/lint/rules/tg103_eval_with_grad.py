"""TG103 eval-with-grad: evaluation forwards run with grad enabled and no backward follows.

Each forward records an autograd graph and keeps activations alive that nothing will use
(https://pytorch.org/docs/stable/generated/torch.no_grad.html). Silent when any enclosing
``with``, a decorator, or every same-file caller disables grad; for evaluation functions that
no code in the file calls (their callers, elsewhere, may disable grad); when the region reads gradients
(``torch.autograd.grad``, ``.grad``, ``requires_grad_``: saliency, adversarial evaluation); and
when parameters are frozen in the file (outputs then carry no ``grad_fn``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from trainguard.lint.astutil import dotted, walk_local
from trainguard.lint.regions import eval_regions
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script

CODE = "TG103"
SKIP_IN_TESTS = True  # about a training run; test files are not runs
_FROZEN = re.compile(r"requires_grad_\(\s*False\s*\)|requires_grad\s*=\s*False")


def check(script: Script) -> Iterator[Hit]:
    if _FROZEN.search(script.source):
        return
    for region in eval_regions(script):
        if _uses_gradients(script, region.node):
            continue
        if isinstance(region.node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                not script.call_sites(region.node):
            continue  # called from another file, whose caller may well hold no_grad
        for fwd in region.forwards:
            if script.grad_disabled(fwd):
                continue
            name = dotted(fwd.func) or "the model"
            yield Hit(fwd, f"{region.label} runs {name}(...) with grad enabled and never calls "
                           f"backward: every batch records a graph that is kept alive for "
                           f"nothing")
            break


def _uses_gradients(script: Script, node: ast.AST) -> bool:
    for n in script.reachable(node):
        for sub in walk_local(n):
            if isinstance(sub, ast.Attribute) and sub.attr in ("grad", "requires_grad_",
                                                               "requires_grad"):
                return True
            if isinstance(sub, ast.Call) and (script.call_qualname(sub) or "").endswith(
                    ("autograd.grad", "enable_grad", "set_grad_enabled")):
                return True
    return False
