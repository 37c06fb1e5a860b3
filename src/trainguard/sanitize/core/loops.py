"""Loops around a backward call, read from the source: where a missing ``zero_grad`` belongs
when the backward runs in a loop of its own (micro-batches, augmented views) inside the loop that
steps, and whether a zeroing sits before such a loop (TG301, on its report path only); and
whether a call follows its loop's training passes (:func:`after_the_passes`, TG101)."""

from __future__ import annotations

import ast
from typing import Any

from trainguard.sanitize.core.callstack import cause_line, shared_depth
from trainguard.sanitize.core.frames import short_location
from trainguard.sanitize.core.source import SourceFile


def inner_loop(backward_at: Any, step_at: Any) -> Any:
    """The innermost ``for``/``while`` around the backward call at ``backward_at`` that does not
    hold the step call at ``step_at`` but sits in the same function and inside a loop that holds
    it (a micro-batch loop), or None."""
    file = SourceFile.load(backward_at[0])
    if file is None:
        return None
    call = file.call_at(backward_at[1], backward_at[2] - 1)
    if call is None:
        return None
    scope = file.scope(call)
    loop = file.loop(call, scope)
    if loop is None or holds(loop, step_at[1]):
        return None
    outer = file.loop(loop, scope)
    while outer is not None and not holds(outer, step_at[1]):
        outer = file.loop(outer, scope)
    if outer is None:
        return None
    # the loop right inside the one that holds the step
    found = loop
    cur = file.loop(found, scope)
    while cur is not None and cur is not outer:
        found, cur = cur, file.loop(cur, scope)
    return found


def holds(node: Any, line: int) -> bool:
    return node.lineno <= line <= (node.end_lineno or node.lineno)


def before_the_loop(zero_at: Any, backward_at: Any) -> bool:
    """Whether the zero_grad at ``zero_at`` is written in the function that runs the backward at
    ``backward_at``, outside (before) the innermost loop around that backward."""
    if zero_at[0] != backward_at[0]:
        return False
    file = SourceFile.load(backward_at[0])
    if file is None:
        return False
    call = file.call_at(backward_at[1], backward_at[2] - 1)
    zero = file.call_at(zero_at[1], zero_at[2] - 1)
    if call is None or zero is None:
        return False
    scope = file.scope(call)
    loop = file.loop(call, scope)
    return (loop is not None and file.scope(zero) is scope and zero.lineno < loop.lineno)


def after_the_passes(file: SourceFile, region: ast.AST, node: ast.AST) -> bool:
    """Whether every backward call in ``region`` (the innermost loop or function around
    ``node``) sits in a loop nested in it that ends before ``node``: an epoch loop's validation
    after its loop over the batches, which no backward of the iteration can reach. False when
    ``region`` has no backward call (an iteration that trains only through a ``step``)."""
    found = False
    for call in ast.walk(region):
        func = call.func if isinstance(call, ast.Call) else None
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name not in ("backward", "manual_backward") and not (
                name == "grad" and "autograd" in ast.unparse(func)):
            continue
        found = True
        cur = file.parents.get(call)
        while cur is not None and cur is not region and not (
                isinstance(cur, (ast.For, ast.AsyncFor, ast.While))
                and (cur.end_lineno or cur.lineno) < node.lineno):
            cur = file.parents.get(cur)
        if cur is None or cur is region:
            return False
    return found


def caller_site(backward_at: Any, backward_stack: Any, step_stack: Any, lead: str,
            step_at: Any) -> tuple[Any, str]:
    """When the step runs in a function of its own that the backward's function calls after the
    backward (a trainer's ``_optim_step()``: step, then the scheduler), the step's line: that
    function owns the update and ``zero_grad`` belongs right after its ``step()``. When the
    backward runs in a helper that the step's code calls (a trainer's ``backward()`` method beside
    its ``optimizer_step()``), the line of the code that runs both which called it: the zeroing
    belongs in that loop, not in the helper that every caller shares."""
    depth = len(backward_stack) - 1
    if (step_at is not None and len(step_stack) > depth + 1
            and shared_depth(backward_stack, step_stack) == depth):
        return step_at, (f"this step runs in a function of its own, called after the backward "
                         f"at {short_location(backward_at)}, and nothing zeroes the gradients "
                         "after it (zero_grad belongs right after this step); so ")
    line = cause_line(backward_stack, step_stack)
    if line is None or line[:2] == backward_at[:2]:
        return backward_at, lead
    return line, (f"this call leads to the backward at {short_location(backward_at)}, which "
                  "added onto gradients that still held the previous step's, and ")


def owns_update(backward_stack: Any, step_stack: Any, forward_depth: int) -> bool:
    """Whether one function called both the backward and the step (a ``backward_step(loss)``
    helper) while the step's forward ran in a caller of it (at ``forward_depth`` of the
    backward's stack): that function owns the update and every caller relies on it, so the
    missing ``zero_grad`` belongs in it, before its backward, as when the forward also runs in
    a function of its own."""
    depth = len(backward_stack) - 1
    return forward_depth < depth and len(step_stack) == depth + 1 and \
        shared_depth(backward_stack, step_stack) == depth
