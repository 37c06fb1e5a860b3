"""A grad context chosen at run time that left grad on: where the choice was made.

``ctx = torch.no_grad() if stage == "validation" else contextlib.nullcontext()`` then ``with
ctx:`` (or the conditional written in the ``with`` itself, or ``torch.set_grad_enabled(stage !=
"val")``) disables grad on one branch only. When a forward inside that ``with`` ran with grad
enabled, the condition picked the other branch: a stage named ``"val"`` where the test says
``"validation"`` (validation that records graphs: facebookresearch/fairchem#199). The
line to change is the choice, not the forward; the values of the names the condition reads in
that frame are shown (plain strings, numbers, booleans and None only).
"""

from __future__ import annotations

import ast
from types import FrameType
from typing import Optional

from trainguard.sanitize.core.frames import Location, user_frame
from trainguard.sanitize.core.source import function_node

__all__ = ["chosen_grad_context"]

_FRAMES = 4  # user frames looked at, from the one making the forward outwards


def _disables(expr: ast.AST) -> bool:
    """Whether ``expr`` makes a context that turns grad off (``torch.no_grad()``,
    ``torch.inference_mode()``, ``torch.set_grad_enabled(False)``)."""
    if not isinstance(expr, ast.Call):
        return False
    func = expr.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name in ("no_grad", "inference_mode"):
        return not expr.args or isinstance(expr.args[0], ast.Constant) and \
            expr.args[0].value is not False
    return name == "set_grad_enabled" and len(expr.args) == 1 and \
        isinstance(expr.args[0], ast.Constant) and expr.args[0].value is False


def _choice(node: ast.AST, with_node: ast.With, expr: ast.AST) -> Optional[ast.AST]:
    """The statement or expression that chose the context ``expr`` of ``with_node``: ``expr``
    itself when it is the conditional, else the last assignment of its name before the
    ``with`` in ``node``; None when it is no choice between grad off and something else."""
    if isinstance(expr, ast.Name):
        stores = [n for n in ast.walk(node) if isinstance(n, ast.Assign)
                  and n.lineno < with_node.lineno and len(n.targets) == 1
                  and isinstance(n.targets[0], ast.Name) and n.targets[0].id == expr.id]
        if not stores:
            return None
        at: ast.AST = max(stores, key=lambda n: n.lineno)
        expr = at.value  # type: ignore[attr-defined]
    else:
        at = expr
    if isinstance(expr, ast.Call) and len(expr.args) == 1 and not isinstance(
            expr.args[0], ast.Constant) and getattr(expr.func, "attr", "") == "set_grad_enabled":
        return at  # ``torch.set_grad_enabled(phase != "val")``: its argument is the choice
    if isinstance(expr, ast.IfExp) and _disables(expr.body) != _disables(expr.orelse):
        return at
    return None


def _values(test: ast.AST, frame: FrameType) -> str:
    """``phase = 'val'``: the plain values of the names ``test`` reads in ``frame``."""
    shown = []
    for name in sorted({n.id for n in ast.walk(test) if isinstance(n, ast.Name)}):
        value = frame.f_locals.get(name, frame.f_globals.get(name, ...))
        if value is None or type(value) in (str, int, float, bool):
            shown.append(f"{name} = {value!r}"[:60])
    return ", ".join(shown)


def chosen_grad_context(frame: Optional[FrameType]) -> Optional[tuple[Location, str]]:
    """``(where, note)`` for a ``with`` around the line ``frame`` (or one of the user frames
    that called it) runs, whose context a conditional chose between grad off and another
    context, when grad is on (the caller checked): the choice's line and what it picked."""
    for _ in range(_FRAMES):
        if frame is None:
            return None
        node = function_node(frame.f_code)
        line = frame.f_lineno
        withs = [w for w in (ast.walk(node) if node is not None else ())
                 if isinstance(w, ast.With) and w.lineno < line <= (w.end_lineno or w.lineno)]
        for with_node in sorted(withs, key=lambda w: -w.lineno):
            for item in with_node.items:
                at = _choice(node, with_node, item.context_expr)
                if at is None:
                    continue
                chooser = at.value if isinstance(at, ast.Assign) else at
                test = chooser.args[0] if isinstance(chooser, ast.Call) else chooser.test
                shown = _values(test, frame)
                note = (f" (its grad context was chosen here by `{ast.unparse(test)}`"
                        f"{f', with {shown}' if shown else ''}, which picked the branch that "
                        "leaves grad on)")
                return (frame.f_code.co_filename, at.lineno, at.col_offset + 1), note
        frame = user_frame(frame.f_back)
    return None
