"""Loops around a backward call, read from the source: where a missing ``zero_grad`` belongs
when the backward runs in a loop of its own (micro-batches, augmented views) inside the loop that
steps, and whether a zeroing sits before such a loop. Used by TG301 on its report path only."""

from __future__ import annotations

from typing import Any

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
