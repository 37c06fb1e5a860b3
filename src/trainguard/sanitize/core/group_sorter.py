"""Where a loop that sorts a model's parameters into groups leaves some out (TG304).

``for name, p in model.named_parameters():`` with ``if name.startswith("visual"):
vision.append(p)`` / ``elif ...: language.append(p)`` puts each parameter in the group of the
first condition it meets; one that meets none is in no group, and the optimizer built from
``[{"params": vision, ...}, {"params": language, ...}]`` never updates it. The line to change is
that loop's last conditional append, right after which a default branch (``else:``) belongs, not
the list of groups (which holds every group the loop fills), when the loop comes before that list in
the same function (or the module's own code). The same holds for a loop over the
model's modules that picks parameters by attribute (``if hasattr(m, "bias"):
biases.append(m.bias)``: a parameter named otherwise falls through, ultralytics/ultralytics#2855).

:func:`sorting_loop_line` finds it for the optimizer built by a call whose groups are written out
(:func:`~trainguard.sanitize.core.source.param_groups_list`): in the function that writes them, a
``for`` loop over ``X.named_parameters()``, ``.parameters()``, ``.named_modules()`` or
``.modules()`` of a name or of ``self.<name>`` (the model, not one of its parts: a part's loop
never saw the rest) that appends or extends, under an ``if``, the lists the groups give as
``params`` (``vision`` or ``groups["vision"]``); a condition on ``requires_grad`` is a filter, not a
sort. Not when the loop also fills a list no group gives (the groups leave that list out), appends
outside any ``if``, or ends its choice with an ``else`` that appends (every parameter is sorted).

Cost: at a finding only, one walk of the function's tree (its file is parsed and cached already).
"""

from __future__ import annotations

import ast

from trainguard.sanitize.core.source import param_groups_list

__all__ = ["sorting_loop_line"]

_WALKS = ("named_parameters", "parameters", "named_modules", "modules")
_ADDS = ("append", "extend")


def sorting_loop_line(where: tuple[str, int, int]) -> int | None:
    """The line of the last conditional append into the groups' lists in a loop over the model's
    parameters (or modules) in the function that writes the groups given to the optimizer built
    by the call at ``where``; None when the groups are not filled so."""
    found = param_groups_list(where)
    if found is None:
        return None
    groups, scope = found
    names = {_base(v) for g in groups.elts for k, v in zip(g.keys, g.values)
             if isinstance(k, ast.Constant) and k.value == "params"} - {None}
    if not names:
        return None
    lines = []
    for loop in _own_nodes(scope):
        if isinstance(loop, ast.For) and _walks_model(loop) and loop.lineno < groups.lineno:
            found = _sorted_adds(loop, names)
            if found is None:
                return None  # every parameter is sorted, or into a list no group gives
            lines += found
    return max(lines) if lines else None


def _own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of ``scope``'s own code, not of the functions or classes it defines."""
    found, todo = [], list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            found.append(node)
            todo.extend(ast.iter_child_nodes(node))
    return found


def _base(node: ast.AST) -> str | None:
    """The name a ``params`` value reads: ``vision``, or ``groups`` of ``groups["vision"]``."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _walks_model(loop: ast.For) -> bool:
    call = loop.iter
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and call.func.attr in _WALKS):
        return False
    owner = call.func.value
    return isinstance(owner, ast.Name) or (
        isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name)
        and owner.value.id == "self")


def _sorted_adds(loop: ast.For, names: set[str]) -> list[int] | None:
    """Lines of ``<list>.append(...)``/``.extend(...)`` into ``names`` under an ``if`` of
    ``loop`` whose test is not about ``requires_grad``; None when the loop adds to a list not in
    ``names``, adds outside any ``if``, or has an ``else`` branch that adds."""
    adds = {id(n): n for n in ast.walk(loop) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute) and n.func.attr in _ADDS}
    if any(_base(n.func.value) not in names for n in adds.values()):
        return None
    found, placed = [], set()
    for branch in ast.walk(loop):
        if not isinstance(branch, ast.If):
            continue
        default = branch.orelse and not (len(branch.orelse) == 1
                                         and isinstance(branch.orelse[0], ast.If))
        for i, stmt in enumerate(branch.body + branch.orelse):
            for node in ast.walk(stmt):
                if id(node) not in adds:
                    continue
                if default and i >= len(branch.body):
                    return None  # an ``else`` sorts what no condition took
                placed.add(id(node))
                if not _grad_filter(branch.test):
                    found.append(node.lineno)
    return found if placed == set(adds) else None


def _grad_filter(test: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "requires_grad" for n in ast.walk(test))
