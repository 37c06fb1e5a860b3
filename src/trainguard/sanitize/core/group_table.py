"""Where parameter groups generated from a table are written (TG304).

``AdamW([{"params": pick(model, name), "lr": lr} for name, lr in lr_table.items()])`` builds one
group per entry of a table written in the source: a module that no entry names is in no group,
and the line to change is that table, not the optimizer's construction.
:func:`group_table_line` finds it for the optimizer built by a call: the list comprehension of
group dicts (with a ``"params"`` key) given as ``params``, directly or through the name last
assigned it in the same function, and the table its first ``for`` iterates (a name last
assigned a dict, list or tuple display before it there, also through ``.items()``, ``.keys()``
or ``.values()``): the line of the table's last entry, where another belongs; the line of what
it iterates when that is not a display found so.

Cost: at a finding only, one parse of the file (cached).
"""

from __future__ import annotations

import ast

from trainguard.sanitize.core.source import last_assigned, optimizer_params

__all__ = ["group_table_line"]

_VIEWS = ("items", "keys", "values")


def group_table_line(where: tuple[str, int, int]) -> int | None:
    """The line of the last entry of the table that the parameter groups given to the optimizer
    built by the call at ``where`` are generated from; None when they are not generated so."""
    found = optimizer_params(where, spread=False)
    if found is None:
        return None
    _, file, call, arg = found
    scope = file.scope(call)
    if isinstance(arg, ast.Name):
        arg = last_assigned(scope, arg.id, call.lineno, (ast.ListComp,))
    if not (isinstance(arg, ast.ListComp) and isinstance(arg.elt, ast.Dict) and any(
            isinstance(k, ast.Constant) and k.value == "params" for k in arg.elt.keys)):
        return None
    table = arg.generators[0].iter
    if (isinstance(table, ast.Call) and isinstance(table.func, ast.Attribute)
            and table.func.attr in _VIEWS and not table.args):
        table = table.func.value
    if isinstance(table, ast.Name):
        table = last_assigned(scope, table.id, arg.lineno,
                              (ast.Dict, ast.List, ast.Tuple)) or table
    if isinstance(table, ast.Dict) and table.keys and table.keys[-1] is not None:
        return table.keys[-1].lineno
    if isinstance(table, (ast.List, ast.Tuple)) and table.elts:
        return table.elts[-1].lineno
    return table.lineno
