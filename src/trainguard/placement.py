"""Where a finding about a helper function belongs, read from the helper's source.

Standard library only, shared by the linter and the sanitizer so that both layers place a
finding at the same line (TG102: a helper that leaves the model in eval mode).
"""

from __future__ import annotations

import ast

__all__ = ["MODE_CALLS", "return_line", "sets_modes_only"]

MODE_CALLS = frozenset(("eval", "train", "requires_grad_"))
"""The ``nn.Module`` methods that switch a module's mode."""


def sets_modes_only(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether ``func`` does nothing but switch modules' modes (``def val_start(self):
    self.img_enc.eval(); self.txt_enc.eval()``, a callback's ``on_validation_begin`` calling
    ``model.eval()``, a loop of ``m.eval()`` over ``modules()``): a mode setter, whose caller
    chooses when the mode changes back."""
    loops = {id(n.iter) for n in ast.walk(func) if isinstance(n, (ast.For, ast.AsyncFor))}
    for stmt in func.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # the docstring
        if not isinstance(stmt, (ast.Expr, ast.For, ast.AsyncFor, ast.If, ast.Pass)):
            return False
        for n in ast.walk(stmt):
            if isinstance(n, (ast.Return, ast.Assign, ast.AugAssign, ast.With, ast.While)):
                return False
            if isinstance(n, ast.Call) and id(n) not in loops and not (
                    isinstance(n.func, ast.Attribute) and n.func.attr in MODE_CALLS):
                return False
    return True


def return_line(func: ast.FunctionDef | ast.AsyncFunctionDef) -> int | None:
    """The line where ``func`` returns after its last statement: that ``return``, else the last
    line of its last statement (after which a call restoring what the function changed goes).
    None for an empty body."""
    if not func.body:
        return None
    last = func.body[-1]
    return last.lineno if isinstance(last, ast.Return) else (last.end_lineno or last.lineno)
