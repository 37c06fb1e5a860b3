"""A carried state handed to a graph-cutting call whose result is thrown away (TG202).

``repackage_hidden(hidden)`` written as a statement of its own: the helper returns the state
detached, but nothing binds what it returns, so ``hidden`` still holds the previous iteration's
graph and the next backward runs into the tensors the last one freed. The line to change is that
statement (``hidden = repackage_hidden(hidden)``), not the model call the graph was made by.

Proof, on the failed backward only: in the innermost loop around the call that made the freed
output (or the step function holding it, when a loop elsewhere calls it), an expression
statement (its value bound to nothing) calls ``h.detach()`` on the carried name, or passes that
name to a function whose own ``return`` statements cut the graph (``h.detach()``, ``h.data``,
``Variable(h.data)``; recursion over a tuple of states counts), resolved in a frame of the
error's traceback. A call kept for its effect (``log_state(hidden)``,
``print(hidden)``: no such return) is no cut.

Cost: on the failed backward only, one walk of the loop's parsed source and of the callee's.
"""

from __future__ import annotations

import ast
import inspect
from typing import Any

from trainguard.sanitize.core.bounds import parse_file
from trainguard.sanitize.core.frames import Location, read_path
from trainguard.sanitize.core.returned_dict import own_returns
from trainguard.sanitize.core.source import function_node

__all__ = ["callee_in_traceback", "dropped_cut"]

_CUTS = frozenset(("detach", "data"))
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def callee_in_traceback(call: ast.Call, path: str, exc: BaseException) -> Any:
    """The Python function that ``call`` (a statement of the file ``path``) calls, resolved in
    a frame of ``exc``'s traceback running that file: a function, or a method looked up on its
    receiver's class without running properties. None when no frame resolves it to code."""
    func_expr = call.func
    name = getattr(func_expr, "attr", getattr(func_expr, "id", None))
    tb = exc.__traceback__
    while tb is not None and name:
        frame = tb.tb_frame
        if frame.f_code.co_filename == path:
            owner = read_path(frame, func_expr.value, global_names=True) \
                if isinstance(func_expr, ast.Attribute) else None
            func = read_path(frame, func_expr, global_names=True) if owner is None else \
                inspect.getattr_static(type(owner), name, None)
            func = getattr(func, "__func__", func)  # (a staticmethod)
            if getattr(func, "__code__", None) is not None:
                return func
        tb = tb.tb_next
    return None


def _cuts_graph(func: Any) -> bool:
    """Whether every value-giving ``return`` of ``func`` cuts the autograd history of what it
    gives back (a ``.detach()`` or ``.data`` in it) or recurses into ``func`` itself."""
    node = function_node(func.__code__)
    if not isinstance(node, _FUNCS):
        return False
    returns = [r.value for r in own_returns(node) if r.value is not None]
    cut = [any(isinstance(n, ast.Attribute) and n.attr in _CUTS for n in ast.walk(v))
           for v in returns]
    again = [any(isinstance(n, ast.Call) and getattr(n.func, "id", None) == node.name
                 for n in ast.walk(v)) for v in returns]
    return any(cut) and all(c or a for c, a in zip(cut, again))


def _detaches(call: ast.Call, name: str) -> bool:
    """Whether ``call`` is ``<name>.detach()``."""
    func = call.func
    return isinstance(func, ast.Attribute) and func.attr == "detach" and \
        ast.unparse(func.value) == name


def _dropped_calls(loop: ast.AST, name: str) -> list[ast.Call]:
    """The calls of ``loop`` made as statements of their own that take ``name`` whole: as an
    argument (``repackage_hidden(hidden)``) or as the receiver of ``.detach()``."""
    found = []
    for node in ast.walk(loop):
        call = node.value if isinstance(node, ast.Expr) else None
        if not isinstance(call, ast.Call):
            continue
        if _detaches(call, name) or any(ast.unparse(a) == name for a in call.args):
            found.append(call)
    return found


def dropped_cut(where: Location | None, name: str,
                exc: BaseException) -> tuple[Location, str] | None:
    """``(location, source)`` of the statement in the innermost loop around the call at
    ``where`` (else the function holding it: a step a loop calls) that cuts the carried state
    ``name`` from its graph and throws the result away (the latest before that call, else the
    first after it). None when there is none."""
    tree = parse_file(where[0]) if where is not None else None
    if tree is None:
        return None
    loops = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While))
             and n.lineno < where[1] <= (n.end_lineno or 0)]
    if not loops:  # a step function that a loop elsewhere calls: its body is the iteration
        loops = [n for n in ast.walk(tree) if isinstance(n, _FUNCS)
                 and n.lineno < where[1] <= (n.end_lineno or 0)]
    if not loops:
        return None
    loop = max(loops, key=lambda n: n.lineno)  # the innermost
    cuts = []
    for call in _dropped_calls(loop, name):
        if _detaches(call, name):
            cuts.append(call)
            continue
        func = callee_in_traceback(call, where[0], exc)
        if func is not None and _cuts_graph(func):
            cuts.append(call)
    if not cuts:
        return None
    before = [c for c in cuts if c.lineno < where[1]]
    call = max(before, key=lambda c: c.lineno) if before else min(cuts, key=lambda c: c.lineno)
    return (where[0], call.lineno, call.col_offset + 1), ast.unparse(call)
