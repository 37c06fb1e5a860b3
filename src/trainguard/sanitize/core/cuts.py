"""Where a computation stops carrying gradient: one traced call, followed tensor by tensor.

Used after a check already has proof that a path is cut (TG205: a module whose output reaches the
loss without its own parameters, or carries no ``grad_fn``), to name the line that cuts it. The
next call of that module's ``forward`` runs under a ``TorchFunctionMode`` (:func:`cut_trace`) that follows the tensors computed from the module's trainable parameters: an op
that takes such a tensor and returns none that requires grad (``.detach()``, ``.data``,
``.item()``, ``float()``/``int()`` (also through ``math.exp(w)``), ``.numpy()``, ``argmax``, an
integer cast, an op run under ``no_grad``) is a cut, and what is computed from a cut output
carries the cut's line along. At the end, the cut the module's output comes from is named; else
the first explicit cut (``detach``/``data``/``item``/``numpy``/``tolist``/``float()``); else the
first cut seen.

Cost: one forward of one module, once per finding, with a Python call per torch op in it; nothing
on other calls. The mode never changes what an op computes (it calls ``func`` as given).

Reference: ``torch.overrides.TorchFunctionMode``
(https://pytorch.org/docs/stable/notes/extending.html#extending-all-torch-api-with-modes) and
"Locally disabling gradient computation" in https://pytorch.org/docs/stable/notes/autograd.html.
"""

from __future__ import annotations

import ast
import sys
from typing import Any

from trainguard.sanitize.core.bounds import GRAPH_NODES, Budget
from trainguard.sanitize.core.callstack import grad_off_site
from trainguard.sanitize.core.frames import Location, is_user_file, user_location
from trainguard.sanitize.core.graph import graph_nodes
from trainguard.sanitize.core.modestack import remove_mode
from trainguard.sanitize.core.source import function_node
from trainguard.sanitize.core.tracing import bounded_mode, op_name, tensors

__all__ = ["cut_trace", "trace_next_forward", "trace_after_forward", "assigned_in_init",
           "assigned_in_methods", "self_stores", "built_lines", "cut_inside", "EXPLICIT"]

EXPLICIT = frozenset({"detach", "detach_", "data", "item", "numpy", "tolist", "nn.Parameter",
                      "__float__", "__int__"})
"""Ops whose only purpose is to leave the graph; preferred when several cuts are seen."""

_OPS = 4096  # ops followed at most in the traced call


def _make_mode(params: list[Any]) -> Any:
    class CutTrace(bounded_mode()):
        """Follows the tensors computed from ``params`` through one call (see the module doc)."""

        limit = _OPS

        def __init__(self) -> None:
            super().__init__()
            self.keep: list[Any] = list(params)  # alive, so that the ids below stay unique
            self.derived = {id(p) for p in params}  # computed from the parameters, with grad
            self.cuts: dict[int, tuple[str, Location | None]] = {}  # id(tensor) -> its cut
            self.seen: list[tuple[str, Location | None]] = []  # every cut, in order

        def _follow(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
            inputs = [t for a in (*args, *kwargs.values()) for t in tensors(a)]
            from_params = any(id(t) in self.derived for t in inputs)
            carried = next((self.cuts[id(t)] for t in inputs if id(t) in self.cuts), None)
            outs = tensors(out)
            if from_params and not any(t.requires_grad for t in outs):
                import torch

                name = op_name(func) if torch.is_grad_enabled() else "no_grad"
                if outs or name in EXPLICIT:  # (shape queries return ints: not cuts)
                    cut = (name, self.caller()) if name != "no_grad" else \
                        grad_off_site(sys._getframe(2))
                    self.seen.append(cut)
                    carried = carried or cut
            for t in outs:
                if from_params and t.requires_grad:
                    self.derived.add(id(t))
                if carried is not None:
                    self.cuts[id(t)] = carried
                elif from_params and not t.requires_grad:
                    # an output without grad beside one with it (``topk(k).indices``): what is
                    # computed from it (``x[perm]``) carries this line
                    self.cuts[id(t)] = (op_name(func), self.caller())
                self.keep.append(t)

        def registered(self, module: Any, name: str, param: Any) -> None:
            """A module parameter registered during the call (``self.lin.weight =
            nn.Parameter(w)``): when it is a new leaf over the memory of a tensor computed
            from the followed ones, wrapping it ended their path (``nn.Parameter`` is not seen
            by the mode)."""
            try:
                if param is None or param.grad_fn is not None:
                    return
                ptr = param.untyped_storage().data_ptr()
                if ptr and any(t is not param and id(t) in self.derived
                               and t.untyped_storage().data_ptr() == ptr for t in self.keep):
                    self.seen.append(("nn.Parameter", user_location(sys._getframe(1))))
            except Exception:
                return  # (a meta or sparse tensor: nothing is said)

        def result(self, output: Any) -> tuple[str, Location | None] | None:
            """The cut ``output`` comes from, else the first explicit cut, else the first."""
            for t in tensors(output):
                if id(t) in self.cuts:
                    return self.cuts[id(t)]
            explicit = [c for c in self.seen if c[0] in EXPLICIT]
            return (explicit or self.seen or [None])[0]

    return CutTrace()


def cut_trace(params: list[Any]) -> Any:
    """A ``TorchFunctionMode`` following the tensors computed from ``params`` (its class is made
    on first use: torch is imported lazily); its ``result(output)`` is ``(op name, user
    location)`` of the cut, or None."""
    return _make_mode(params)


def trace_next_forward(module: Any, done: Any) -> None:
    """Trace ``module``'s next ``forward`` call with a :func:`cut_trace` over its trainable
    parameters and call ``done((op, location))`` when a cut is found; hooks removed after it."""
    handles: list[Any] = []
    active: list[Any] = []

    def before(mod: Any, inputs: Any) -> None:
        if not active and handles:
            _enter(active, handles, lambda: [p for p in mod.parameters() if p.requires_grad])

    def after(mod: Any, inputs: Any, output: Any) -> None:
        if active:  # (no output: the forward raised, nothing to say)
            _leave(active, handles, output, done if output is not None else None)

    handles.append(module.register_forward_pre_hook(before))
    handles.append(module.register_forward_hook(after, always_call=True))


def trace_after_forward(module: Any, root: Any, done: Any) -> None:
    """Trace from the end of ``module``'s next call to the end of the call of ``root`` (the
    model around it) that made it, following the tensors computed from ``module``'s output, and
    call ``done((op, location))`` with the first explicit cut of them (else the first cut):
    the op after which the output no longer reaches the loss."""
    handles: list[Any] = []
    active: list[Any] = []

    def after(mod: Any, inputs: Any, output: Any) -> None:
        if not active and len(handles) == 2:
            handles.pop(0).remove()  # once
            _enter(active, handles, lambda: tensors(output))

    def end(mod: Any, inputs: Any, output: Any) -> None:
        if active:
            _leave(active, handles, None, done)

    handles.append(module.register_forward_hook(after))
    handles.append(root.register_forward_hook(end, always_call=True))


def _enter(active: list[Any], handles: list[Any], followed: Any) -> None:
    """Enter a :func:`cut_trace` following the tensors ``followed()`` gives (on failure, remove
    the hooks)."""
    try:
        from torch.nn.modules.module import register_module_parameter_registration_hook

        mode = cut_trace(followed())
        mode.__enter__()
        active.append(mode)
        handles.append(register_module_parameter_registration_hook(mode.registered))
    except Exception:
        _release(handles)


def _leave(active: list[Any], handles: list[Any], output: Any, done: Any) -> None:
    """Take the trace off the mode stack, remove the hooks, and call ``done`` (unless None)
    with the cut :meth:`result` names for ``output``, if any."""
    mode = active.pop()
    try:
        remove_mode(mode)
    finally:
        _release(handles)
    if done is None:
        return
    try:
        cut = mode.result(output)
    except Exception:
        return
    if cut is not None:
        done(cut)


def _release(handles: list[Any]) -> None:
    for handle in handles:
        handle.remove()
    handles.clear()


def assigned_in_init(cls: type, attr: str) -> Location | None:
    """The ``self.<attr> = ...`` statement of the first user-defined ``__init__`` in ``cls``'s
    MRO (where a submodule was made), or None."""
    return _assigned(cls, attr, init=True)


def assigned_in_methods(cls: type, attr: str) -> Location | None:
    """The first ``self.<attr> = ...`` statement in a method other than ``__init__`` of the
    user-defined classes in ``cls``'s MRO (where a cache is filled during the run), or None."""
    return _assigned(cls, attr, init=False)


def _assigned(cls: type, attr: str, *, init: bool) -> Location | None:
    for function, stmt, _ in self_stores(cls, attr, init=init, classes=4):
        return (function.__code__.co_filename, stmt.lineno, stmt.col_offset + 1)
    return None


def self_stores(cls: type, attr: str, *, init: bool | None = None, classes: int = 8
                ) -> list[tuple[Any, ast.stmt, ast.expr]]:
    """``(function, statement, value)`` of each ``self.<attr> = value`` statement (plain,
    annotated, or one element of a tuple target, ``out, self.hidden = self.lstm(x)``, whose value
    is then the whole right side) in the methods of the first ``classes`` classes of ``cls``'s
    MRO, most derived first. ``init``: True for ``__init__`` only (that of the first class that
    defines one: the one that ran), False for the other methods, None for all."""
    if not attr.isidentifier():  # a Sequential's or ModuleList's index
        return []
    found = []
    for klass in cls.__mro__[:classes]:
        functions = [f for f in vars(klass).values() if hasattr(f, "__code__")
                     and (init is None or (f.__name__ == "__init__") == init)]
        for function in functions:
            node = function_node(function.__code__)
            for stmt in ast.walk(node) if isinstance(node, ast.FunctionDef) else ():
                targets = stmt.targets if isinstance(stmt, ast.Assign) else \
                    [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
                if targets and stmt.value is not None and any(
                        isinstance(t, ast.Attribute) and t.attr == attr
                        and isinstance(t.value, ast.Name) and t.value.id == "self"
                        for target in targets for t in _elements(target)):
                    found.append((function, stmt, stmt.value))
        if init and functions:
            break  # the first __init__ defined is the one that ran
    return found


def _elements(target: ast.AST) -> list[ast.AST]:
    """The targets a (possibly nested) tuple or list target assigns, or the target itself."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return [t for e in target.elts for t in _elements(e)]
    if isinstance(target, ast.Starred):
        return _elements(target.value)
    return [target]


def built_lines(models: Any, modules: dict[str, Any]) -> dict[str, Location]:
    """``name -> location`` of the ``self.<attr> = ...`` statement in the ``__init__`` of the
    module holding each submodule of ``modules`` (qualified names in one of ``models``): for one
    never called, the line to change or remove."""
    out = {}
    for model in list(models):
        for name, module in model.named_modules():
            if name and name in modules and modules[name] is module:
                parent, _, attr = name.rpartition(".")
                where = assigned_in_init(type(model.get_submodule(parent)), attr)
                if where is not None:
                    out[name] = where
    return out


def routed(models: Any, name: str) -> bool:
    """Whether submodule ``name`` (a qualified name in one of ``models``) is an element of a
    ``ModuleList``/``ModuleDict`` that its owner's ``forward`` loops over and calls under an
    ``if``: an expert of a mixture that the router picks per batch, never called when the routing
    collapses onto other experts (a routing outcome, not a cut path)."""
    import torch

    container_name, _, _ = name.rpartition(".")
    owner_name, _, attr = container_name.rpartition(".")
    for model in list(models):
        try:
            container = model.get_submodule(container_name)
            owner = model.get_submodule(owner_name)
        except (AttributeError, ValueError):
            continue
        if not isinstance(container, (torch.nn.ModuleList, torch.nn.ModuleDict)):
            return False
        forward = getattr(type(owner).forward, "__code__", None)
        node = function_node(forward) if forward is not None else None
        for loop in ast.walk(node) if isinstance(node, ast.FunctionDef) else ():
            if isinstance(loop, ast.For) and any(
                    isinstance(n, ast.Attribute) and n.attr == attr
                    and isinstance(n.value, ast.Name) and n.value.id == "self"
                    for n in ast.walk(loop.iter)):
                return any(isinstance(n, ast.If) and any(isinstance(c, ast.Call)
                                                         for c in ast.walk(n))
                           for stmt in loop.body for n in ast.walk(stmt))
        return False
    return False


def cut_inside(module: Any, node: Any) -> Any:
    """``(path, line, 0)`` of ``module``'s ``forward`` when its output's graph (``node``, walked in
    full within the bound) holds none of the module's own trainable parameters: the forward
    itself cuts them (``.item()``, ``.data``, ``.detach()`` of a weight); else None."""
    if module is None:
        return None
    own = {id(p) for p in module.parameters() if p.requires_grad}
    budget = Budget(GRAPH_NODES)
    for n in graph_nodes(node, budget=budget):
        variable = getattr(n, "variable", None)
        if variable is not None and id(variable) in own:
            return None
    forward = getattr(type(module).forward, "__code__", None)
    if budget.spent or not own or forward is None or not is_user_file(forward.co_filename):
        return None
    return (forward.co_filename, forward.co_firstlineno, 0)
