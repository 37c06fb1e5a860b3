"""TG303 step-missing: backward runs but no optimizer ever steps.

Gradients are computed and thrown away; the parameters never change. Fires only when the file
builds an optimizer, a loop runs backward in a function that names an optimizer, and nothing in
the file steps it: no ``.step()`` on an
optimizer or a ``GradScaler``, no manual update from ``.grad`` (manual SGD), and no call in the
loop that is handed the optimizer (a helper elsewhere may step it).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import walk_local
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script, is_backward

CODE = "TG303"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    if not script.optimizers or _steps_somewhere(script) or _manual_update(script):
        return
    for call in script.calls:
        if not is_backward(call) or not script.enclosing_loops(call):
            continue
        loop = script.enclosing_loops(call)[-1]
        if _hands_optimizer(script, loop) or not _scope_has_optimizer(script, loop):
            continue
        names = ", ".join(sorted(script.optimizers))
        at = script.at(loop.lineno)  # type: ignore[attr-defined]
        yield Hit(call, f"backward() runs in the loop at {at} but "
                        f"{names}.step() is never called: the parameters never change",
                  fix=f"call {sorted(script.optimizers)[0]}.step() after backward()")
        return


def _steps_somewhere(script: Script) -> bool:
    for call in script.calls:
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr == "step":
            k = script.key(f.value)
            if not script.is_scheduler(k):
                return True
    return False


def _manual_update(script: Script) -> bool:
    for node in script.nodes:
        if isinstance(node, (ast.AugAssign, ast.Assign, ast.Call)) and any(
                isinstance(s, ast.Attribute) and s.attr == "grad" for s in ast.walk(node)):
            if isinstance(node, ast.Assign) and all(
                    isinstance(t, ast.Attribute) and t.attr == "grad" for t in node.targets):
                continue  # p.grad = None is zeroing, not updating
            return True
    return False


def _hands_optimizer(script: Script, loop: ast.AST) -> bool:
    for call in walk_local(loop):
        if isinstance(call, ast.Call) and not (isinstance(call.func, ast.Attribute)
                                               and call.func.attr == "zero_grad"):
            for arg in [*call.args, *(k.value for k in call.keywords)]:
                if script.is_optimizer(script.key(arg)):
                    return True
    return False


def _scope_has_optimizer(script: Script, loop: ast.AST) -> bool:
    """The function (or module) around the loop names an optimizer: a profiling loop that runs
    backward in a file that also builds optimizers elsewhere is not a training loop."""
    scope = script.enclosing_function(loop) or script.tree
    return any(isinstance(n, (ast.Name, ast.Attribute)) and script.is_optimizer(script.key(n))
               for n in walk_local(scope))
