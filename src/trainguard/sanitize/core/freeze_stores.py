"""The freezing store that left an optimizer with only frozen parameters, read from the source.

An optimizer built over parameters that all have ``requires_grad=False`` got them from the
``requires_grad`` stores that ran before it. When the function that built it first freezes a
whole model (``for p in model.parameters(): p.requires_grad = False``) and then, for the
parameters a condition picks, stores ``False`` again (``for n, p in model.named_parameters(): if
n.startswith("head"): p.requires_grad = False``), that second store changes nothing: those
parameters were frozen already, so the selective loop was meant to unfreeze (``True``). That
store is the line to change. Only this shape is named: a single freezing store before the
optimizer may be the intent (the optimizer's parameter list, or a missing unfreeze, is then the
fault), so it is left to the backward's line.

A second shape is named from the registrations user code made on a model already built: a new
submodule assigned in a function (``model.fc = nn.Linear(512, 10)``, a fresh head) and, later in
that same function, a loop storing ``False`` into every parameter of that model, unguarded
(``for p in model.parameters(): p.requires_grad = False``). That loop froze the head it had just
attached: when the optimizer holds that head's parameters, the loop is the line to change (walk
only the backbone's parameters). A loop over another module, a guarded store, or a head the
optimizer does not hold leaves the backward's line.

The loops' models are read from the builder's frame with ``vars()`` (``self.model``,
``model.encoder`` through ``_modules``), no user code runs; one parse of the builder's file.
"""

from __future__ import annotations

import ast
import weakref
from types import FrameType
from typing import Any

from trainguard.sanitize.core.frames import Location, read_path, short_location
from trainguard.sanitize.core.source import SourceFile, function_node, parse_file

__all__ = ["NewModules", "redundant_freeze", "store_note"]

NEW_MODULES = 64  # registrations kept (a run attaches a head or two, not one per step)


def redundant_freeze(frame: FrameType, built: Location, params: list[Any]) -> Location | None:
    """The selective ``requires_grad = False`` store (or ``requires_grad_(False)``) that the
    function of ``frame`` ran, before line ``built`` where it built an optimizer over ``params``
    (all frozen), after a store freezing every parameter of the same model; None when the
    source does not show that shape."""
    func = function_node(frame.f_code)
    if func is None or built[0] != frame.f_code.co_filename:
        return None
    wanted = {id(p) for p in params}
    blanket, selective, unfrozen = [], [], []
    for loop in (n for n in ast.walk(func) if isinstance(n, ast.For) and n.lineno < built[1]):
        model = _loop_model(frame, loop)
        if model is None or not any(id(p) in wanted for p in model.parameters()):
            continue
        unfrozen += [(store, model) for store in _stores(loop, True)]
        for store in _stores(loop, False):
            (selective if _guarded(loop, store) else blanket).append((store, model))
    if not blanket or not selective:
        return None
    last = max(selective, key=lambda s: s[0].lineno)
    first = [s.lineno for s, m in blanket if m is last[1] and s.lineno < last[0].lineno]
    if not first or any(m is last[1] and min(first) < s.lineno < last[0].lineno
                        for s, m in unfrozen):
        return None  # (the whole model frozen first, then the picked ones stored False again)
    return frame.f_code.co_filename, last[0].lineno, last[0].col_offset + 1


def store_note(head: tuple[Location, str, Location] | None, backward: str) -> tuple[str, str]:
    """``(note, fix)`` for a finding moved from the failed backward (at ``backward``) to the
    store :func:`redundant_freeze` found (``head`` None) or the loop
    :meth:`NewModules.frozen_after` found (``head``, its result)."""
    if head is not None:
        return (f"; this loop froze every parameter of the model, {head[1]} included, the new "
                f"module assigned at {short_location(head[2])} just before it, whose parameters "
                f"the optimizer holds (backward at {backward})",
                "freeze only the pretrained part (its .parameters()), not the new module")
    return ("; the optimizer was built over them after this store, which sets requires_grad=False"
            " on parameters an earlier loop froze already, so it changes nothing (backward at "
            f"{backward})", "store True there (p.requires_grad = True): that loop picks what to "
            "train")


def _stores(loop: ast.For, value: bool) -> list[ast.AST]:
    """The stores of ``value`` into the loop variable's ``requires_grad`` in ``loop``'s body:
    ``p.requires_grad = False``, ``p.requires_grad_(False)``."""
    names = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    found: list[ast.AST] = []
    for node in (n for stmt in loop.body for n in ast.walk(stmt)):
        if isinstance(node, ast.Assign) and _is(node.value, value) and any(
                isinstance(t, ast.Attribute) and t.attr == "requires_grad"
                and isinstance(t.value, ast.Name) and t.value.id in names for t in node.targets):
            found.append(node)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "requires_grad_" and node.args \
                and _is(node.args[0], value) and isinstance(node.func.value, ast.Name) \
                and node.func.value.id in names:
            found.append(node)
    return found


def _guarded(loop: ast.For, store: ast.AST) -> bool:
    """Whether an ``if`` inside ``loop`` holds ``store`` (the parameters a condition picks)."""
    return any(isinstance(n, ast.If) and store in list(ast.walk(n)) for n in ast.walk(loop))


def _is(node: ast.AST, value: bool) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def _loop_model(frame: FrameType, loop: ast.For) -> Any:
    """The module whose ``parameters()`` or ``named_parameters()`` the loop walks
    (``self.model.named_parameters()``), read from ``frame``; None otherwise."""
    it = loop.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
            and it.func.attr in ("parameters", "named_parameters")):
        return None
    value = read_path(frame, it.func.value)
    return value if callable(getattr(value, "parameters", None)) and \
        isinstance(getattr(value, "_modules", None), dict) else None


class NewModules:
    """The parameters user code registered on models already built, with the line that did it
    (``on_params_added``): the newest :data:`NEW_MODULES`."""

    def __init__(self) -> None:
        self.added: list[tuple[list[Any], Location]] = []  # (weakrefs to the params, line)

    def note(self, params: list[Any], where: Location | None) -> None:
        if where is not None:
            self.added = [*self.added[-NEW_MODULES + 1:], ([weakref.ref(p) for p in params], where)]

    def frozen_after(self, params: list[Any]) -> tuple[Location, str, Location] | None:
        """``(loop, name, assigned)``: the unguarded loop freezing every parameter of a model
        that ran after the assignment at ``assigned`` attached ``name`` (``model.fc``) to it, in
        the same function, when ``params`` (an optimizer's, all frozen) hold that module's
        parameters; None otherwise."""
        held = {id(p) for p in params}
        for refs, where in reversed(self.added):
            if any(id(p) in held for r in refs if (p := r()) is not None):
                found = _freeze_after(where)
                if found is not None:
                    return found[0], found[1], where
        return None


def _freeze_after(where: Location) -> tuple[Location, str] | None:
    """The loop, after the assignment of a submodule at ``where`` (``model.fc = ...``) and in the
    same function (or module code), that stores ``False`` unguarded into every parameter of the
    assignment's model (``for p in model.parameters():``), with the assigned target's text."""
    tree = parse_file(where[0])
    file = SourceFile.of(tree)
    stmt = next((n for n in ast.walk(tree) if isinstance(n, ast.Assign)
                 and n.lineno == where[1] and len(n.targets) == 1
                 and isinstance(n.targets[0], (ast.Attribute, ast.Subscript))), None) \
        if tree is not None else None
    if stmt is None or file is None:
        return None
    model, scope = ast.unparse(stmt.targets[0].value), file.scope(stmt)
    for loop in sorted((n for n in ast.walk(scope) if isinstance(n, ast.For)
                        and n.lineno > (stmt.end_lineno or stmt.lineno)
                        and file.scope(n) is scope), key=lambda n: n.lineno):
        it = loop.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
                and it.func.attr in ("parameters", "named_parameters")
                and ast.unparse(it.func.value) == model):
            continue
        if any(not _guarded(loop, store) for store in _stores(loop, False)):
            return (where[0], loop.lineno, loop.col_offset + 1), ast.unparse(stmt.targets[0])
    return None
