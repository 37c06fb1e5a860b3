"""Where code runs once per process of a ``torch.distributed`` process group: in a worker that
joins the group, in the function ``torch.multiprocessing`` starts for each rank, or in the
top level of a script launched once per rank (``torchrun``)."""

from __future__ import annotations

import ast

from trainguard.lint.astutil import dotted, kwarg, walk_local
from trainguard.lint.script import Script

__all__ = ["on_every_rank"]


def on_every_rank(script: Script, node: ast.AST, depth: int) -> bool:
    """``node`` runs in each process of a process group: in a function that joins it
    (``init_process_group``, a ``DistributedDataParallel`` wrapper), one handed to
    ``mp.spawn``/``mp.start_processes``/``mp.Process(target=...)``, one called from those, or
    at the top level of a script that joins the group there (under ``torchrun``)."""
    func = script.enclosing_function(node)
    scope: ast.AST = func if func is not None else script.tree
    if any(isinstance(c, ast.Call) and _joins(script, c) for c in walk_local(scope)):
        return True
    if func is None:
        return False
    if any(_spawns(script, c, func.name) for c in script.calls):
        return True
    sites = list(script.call_sites(func)[:8])
    cls = script.enclosing_class(func)
    if func.name == "__init__" and cls is not None:  # Trainer(rank, out_dir) builds it
        sites += [c for c in script.calls if dotted(c.func) == cls.name][:8]
    return depth > 0 and any(on_every_rank(script, site, depth - 1) for site in sites)


def _joins(script: Script, call: ast.Call) -> bool:
    q = script.call_qualname(call) or dotted(call.func) or ""
    return q.endswith(("init_process_group", "DistributedDataParallel")) or q == "DDP"


def _spawns(script: Script, call: ast.Call, name: str) -> bool:
    """``mp.spawn(worker, ...)``, ``mp.start_processes(worker, ...)``, ``mp.Process(
    target=worker)``: ``call`` starts processes that run the function ``name``."""
    q = script.call_qualname(call) or dotted(call.func) or ""
    if not q.endswith(("spawn", "start_processes", "Process")):
        return False
    fn = call.args[0] if call.args else kwarg(call, "fn") or kwarg(call, "target")
    return isinstance(fn, ast.Name) and fn.id == name
