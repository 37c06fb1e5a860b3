"""TG301 grads-accumulate: optimizer steps with no gradient zeroing in between.

``backward()`` adds into ``.grad`` (https://pytorch.org/docs/stable/optim.html#taking-an-optimization-step);
without ``zero_grad()`` in the loop every step uses the sum of all earlier gradients. Any zeroing
counts (``optimizer.zero_grad()``, ``model.zero_grad()``, ``p.grad = None``, ``p.grad.zero_()``),
wherever it sits in the iteration and in same-file functions the loop calls, including an LBFGS
closure. Declared accumulation (zeroing after each conditional step) has zeroing and is silent.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import walk_local
from trainguard.lint.events import events
from trainguard.lint.regions import training_loops
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script

CODE = "TG301"
SKIP_IN_TESTS = True  # about a training run; test files are not runs
# Distributed autograd (torch.distributed.autograd.backward(context_id, ...)) accumulates into a
# fresh context per iteration, so its loops need no zeroing.


def check(script: Script) -> Iterator[Hit]:
    for loop in training_loops(script):
        evs = events(script, loop.body)  # type: ignore[attr-defined]
        if any(e.kind == "zero" for e in evs) or _zeroes_in_closure(script, loop):
            continue
        if any((script.call_qualname(e.node) or "").startswith("torch.distributed.autograd")
               for e in evs if e.kind == "backward"):
            continue  # distributed autograd keeps gradients per context: nothing to zero
        step = next(e for e in evs if e.kind == "step")
        uncalled = _uncalled_zero_grad(loop)
        if uncalled is not None:
            yield Hit(uncalled, f"`{ast.unparse(uncalled)}` names the method but never calls it: "
                                f"gradients are never zeroed and add up over every step",
                      fix=f"call it: {ast.unparse(uncalled)}()")
            continue
        yield Hit(step.node,
                  f"{step.key or 'the optimizer'}.step() runs every iteration of the loop at "
                  f"line {loop.lineno} but gradients are never zeroed inside it: each step "
                  f"uses the sum of all earlier gradients",
                  fix=f"call {step.key or 'optimizer'}.zero_grad(set_to_none=True) once per step "
                      f"(before backward or after step)")


def _zeroes_in_closure(script: Script, loop: ast.AST) -> bool:
    """Functions defined in the loop or passed to ``step(closure)`` that zero gradients."""
    funcs = [n for n in walk_local(loop, into_defs=True)
             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
    for call in walk_local(loop):
        if isinstance(call, ast.Call):
            for arg in [*call.args, *(k.value for k in call.keywords)]:
                if isinstance(arg, ast.Name):
                    funcs.extend(script.functions.get(arg.id, ()))
    for f in funcs:
        for sub in ast.walk(f):
            if isinstance(sub, ast.Attribute) and sub.attr in ("zero_grad", "grad"):
                return True
    return False


def _uncalled_zero_grad(loop: ast.AST) -> ast.AST | None:
    """``optimizer.zero_grad`` as a statement, without the call parentheses."""
    for sub in walk_local(loop):
        if isinstance(sub, ast.Expr) and isinstance(sub.value, ast.Attribute) and \
                sub.value.attr == "zero_grad":
            return sub.value
    return None
