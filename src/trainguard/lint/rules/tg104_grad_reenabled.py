"""TG104 grad-reenabled: ``torch.enable_grad()`` / ``set_grad_enabled(True)`` inside evaluation.

Inside ``with torch.no_grad()`` (or an evaluation function), re-enabling grad makes the outputs
carry a ``grad_fn`` again (https://pytorch.org/docs/stable/generated/torch.enable_grad.html).
Silent when the re-enabled block reads gradients on purpose (``backward``,
``torch.autograd.grad``, ``.grad``: adversarial examples, saliency maps, test-time training).
``requires_grad_(True)`` alone under no_grad builds no graph and is not flagged.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import is_true, walk_local
from trainguard.lint.regions import eval_regions, forward_calls
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script, is_backward

CODE = "TG104"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    regions = [r.node for r in eval_regions(script)
               if isinstance(r.node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for node in script.nodes:
        target: ast.AST | None = None
        block: ast.AST | None = None
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if script.grad_context(item.context_expr) is False:
                    target, block = item.context_expr, node
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            q = script.call_qualname(node.value) or ""
            if q.endswith("set_grad_enabled") and node.value.args and \
                    is_true(node.value.args[0]):
                target, block = node.value, script.enclosing_function(node) or script.tree
        if target is None or block is None or _reads_grads(script, block):
            continue
        if isinstance(block, (ast.With, ast.AsyncWith)) and not forward_calls(script, block):
            continue  # nothing computed in the block carries a graph (e.g. an optimizer step)
        inside = script.grad_disabled(node)
        region = next((r for r in regions if _within(node, r)), None)
        if not inside and region is None:
            continue
        where = "a torch.no_grad() region" if inside else f"evaluation function {region.name}()"
        yield Hit(target, f"grad is re-enabled inside {where}: outputs computed here carry a "
                          f"grad_fn and build graphs that evaluation never uses")


def _within(node: ast.AST, outer: ast.AST) -> bool:
    return any(sub is node for sub in walk_local(outer))


def _reads_grads(script: Script, block: ast.AST) -> bool:
    for n in script.reachable(block):
        for sub in walk_local(n):
            if is_backward(sub) or (isinstance(sub, ast.Attribute) and sub.attr == "grad"):
                return True
            if isinstance(sub, ast.Call) and (script.call_qualname(sub) or "").endswith(
                    "autograd.grad"):
                return True
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and \
                    sub.func.id == "closure":
                return True  # an optimizer's closure runs backward
    return False
