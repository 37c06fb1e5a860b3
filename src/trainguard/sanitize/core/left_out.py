"""Where parameters left out of every optimizer are reported (TG304), and why.

Parameters registered on a model after its optimizer was built are reported at the line that
added them (``model.fc = nn.Linear(...)`` after ``Adam(model.parameters())``), except when the
model's own call registered them: a submodule whose size is only known from the first input,
built inside ``forward()`` on the first call. That call is the model's use, not a change to undo:
the line to change is the optimizer's construction, which belongs after a first forward (a dry
run), as PyTorch's ``LazyModuleMixin`` docs ask of lazy modules. Otherwise: the parameter groups
written by hand that leave them out (or the loop that sorts parameters into them and lets them
fall through, or the table they are generated from), the line that
replaced the model the optimizer holds, a ``requires_grad`` filter that ran while they were
frozen, else the optimizer's construction.
"""

from __future__ import annotations

from types import FrameType
from typing import Any

from trainguard.sanitize.core.bounds import FRAMES
from trainguard.sanitize.core.frames import short_location
from trainguard.sanitize.core.group_sorter import sorting_loop_line
from trainguard.sanitize.core.group_table import group_table_line
from trainguard.sanitize.core.source import (built_again, param_groups_line, params_line,
                                            picks_trainable)

__all__ = ["in_model_call", "left_out_cause"]


def in_model_call(start: FrameType | None, stop: FrameType | None) -> bool:
    """Whether a module's ``__call__`` runs between ``start`` and ``stop`` (exclusive; None:
    the next :data:`~trainguard.sanitize.core.bounds.FRAMES` frames and more): a registration
    made by a model's forward (or its forward hooks) while it is called."""
    from torch import nn

    calls = {nn.Module._call_impl.__code__}
    wrapped = getattr(nn.Module, "_wrapped_call_impl", None)
    if wrapped is not None:
        calls.add(wrapped.__code__)
    frame, depth = start, 0
    while frame is not None and frame is not stop and depth < 4 * FRAMES:
        if frame.f_code in calls:
            return True
        frame, depth = frame.f_back, depth + 1
    return False


def left_out_cause(built: Any, where: Any, added: Any, them: str, s: str,
                    model: str) -> tuple[Any, str]:
    """Where left-out parameters are reported, and why: the line that added them, the groups
    written without them, a ``requires_grad`` filter, else the optimizer's construction."""
    why = ("the optimizer was built before they were added, replaced or unfrozen, or "
           "they were left out of it without being frozen")
    groups_at = param_groups_line(built) if built is not None and where == built else None
    table_at = group_table_line(built) if built is not None and where == built else None
    if added is not None and added[2] and built is not None:  # built by the model's call
        by = short_location(added[1] or added[0])
        why = (f"the model's forward built {them} at {by}, on its first call (at "
               f"{short_location(added[0])}), after this optimizer was built; build the "
               "optimizer after a first forward (a dry run), as for lazy modules")
        where = built
    elif added is not None:  # the cause: the line that added them
        where, inner = added[:2]
        by = f" (at {short_location(inner)})" if inner else ""
        why = (f"this line added {them}{by} to a model already built, and no optimizer "
               f"was given {them} afterwards")
    elif groups_at is not None and (sort_at := sorting_loop_line(built)) is not None:
        where = (built[0], sort_at, 1)  # the loop that sorts parameters into the groups
        they = "it" if them == "it" else "they"
        why = (f"this loop sorts the model's parameters into the groups listed up to line "
               f"{groups_at} for the optimizer built at line {built[1]}, and {they} meet{s} "
               "none of its conditions; add a default branch (else) that puts the rest in a "
               "group")
    elif groups_at is not None:  # groups written out by hand: the list that left them out
        where = (built[0], groups_at, 1)
        why = (f"the parameter groups listed here for the optimizer built at line "
               f"{built[1]} leave {them} out; add a group holding {them}")
    elif table_at is not None:  # groups generated from a table: the table that left them out
        where = (built[0], table_at, 1)
        why = (f"the parameter groups of the optimizer built at line {built[1]} are generated "
               f"from this table, and no entry of it covers {them}; add one for {them}")
    elif built is not None and where == built and (again := built_again(built, model)):
        where = (built[0], again, 1)  # ``net = deepen(net)``: a model with new layers
        why = (f"the optimizer built at line {built[1]} holds the model this line replaced, "
               f"not {them}; build it again after this line")
    elif built is not None and where == built and picks_trainable(built):
        # ``[p for p in model.parameters() if p.requires_grad]``: frozen then, unfrozen later
        where = (built[0], params_line(built) or built[1], 1)
        they, were = ("it", "was") if them == "it" else ("they", "were")
        why = (f"the optimizer built at line {built[1]} was given only the parameters that "
               f"required grad here, and {they} {were} frozen then: unfrozen later "
               f"(requires_grad = True), {they} need{s} optimizer.add_param_group(...)")
    return where, why

