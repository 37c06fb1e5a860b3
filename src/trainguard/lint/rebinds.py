"""A model rebound to a new module after its optimizer was built.

An optimizer holds the parameter tensors it was given, not the name they were reached by
(https://pytorch.org/docs/stable/optim.html#constructing-it). ``model = make_model()`` after
``optimizer = Adam(model.parameters())`` (every fold of a cross-validation that rebuilds the
model but not the optimizer), or ``clone.net = copy.deepcopy(self.net)`` on a shallow copy that
shares the original's optimizer, leaves ``optimizer.step()`` updating the old parameters: the
model that is trained and evaluated never changes.

``stale_optimizers(script)`` yields ``(rebinding, optimizer key, model key, step, shared)`` (shared:
the optimizer came with a shallow copy) for each such
rebinding that is followed, in the same function, by a step of that optimizer that nothing
rebuilt (an assignment to it, ``add_param_group``), or, for a shallow copy, whose class steps the
optimizer in some method. A new module is a constructor of a module class, a builder function
that returns one, or ``copy.deepcopy``; ``model.to(device)``, ``torch.compile(model)`` and
wrappers (``DDP(model)``) keep the same parameters and are not new.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import SCOPES, dotted, parent, walk_local
from trainguard.lint.callgraph import RETURNS_SELF
from trainguard.lint.events import events
from trainguard.lint.optimizers import held_modules
from trainguard.lint.script import _MODEL_CTOR, DEEP_COPIES, Script

__all__ = ["stale_optimizers"]

Stale = tuple[ast.stmt, str, str, ast.AST, bool]  # rebinding, optimizer, model, step, shared


def stale_optimizers(script: Script) -> Iterator[Stale]:
    holders: dict[str, list[str]] = {}  # model key -> optimizers built from it
    for opt in sorted(script.optimizers):
        for m in held_modules(script, opt) or ():
            holders.setdefault(m, []).append(opt)
    if not holders:
        return
    for node in script.nodes:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        key = script.key(node.targets[0])
        if key is None:
            continue
        opts = [o for o in holders.get(key, ()) if _same_scope(script, o, node)]
        if opts and _fresh(script, node.value, key):
            for opt in opts:
                step = _stepped_after(script, node, opt, key)
                if step is not None:
                    yield node, opt, key, step, False
        copied = _copy_rebinding(script, node)
        if copied is not None:
            yield copied


def _same_scope(script: Script, opt: str, rebinding: ast.stmt) -> bool:
    """``opt`` is built where the rebound name means the same object: in the same function (a
    local or module name) or, for ``self.`` attributes, in the same class."""
    if opt.startswith("self."):
        where, scope = script.enclosing_class, script.enclosing_class(rebinding)
    else:
        where, scope = script.enclosing_function, script.enclosing_function(rebinding)
    return any(isinstance(n, ast.Assign) and any(script.key(t) == opt for t in n.targets) and
               where(n) is scope for n in script.nodes)


def _fresh(script: Script, value: ast.expr, key: str, depth: int = 2) -> bool:
    """``value`` builds a module with parameters of its own (not ones ``key`` already has)."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
            value.func.attr in RETURNS_SELF and isinstance(value.func.value, ast.Call):
        value = value.func.value  # Net().to(device)
    if not isinstance(value, ast.Call):
        return False
    q = script.call_qualname(value) or ""
    if q.endswith(DEEP_COPIES):
        return True
    if any(script.key(n) == key for n in ast.walk(value) if isinstance(n, (ast.Name,
                                                                              ast.Attribute))):
        return False  # model.to(device), torch.compile(model), DDP(model): the same tensors
    if _MODEL_CTOR.search(q) and not q.endswith(("DataParallel", "compile")) and \
            "DDP" not in q and "FSDP" not in q:
        return True
    graph = script.graph
    if any(graph.is_module_class(c) for c in graph.types(value)) and \
            graph.class_named(dotted(value.func)) is not None:
        return True
    if depth <= 0:
        return False
    for target in graph.targets(value):
        returns = [n.value for n in walk_local(target.func)
                   if isinstance(n, ast.Return) and n.value is not None]
        if returns and all(_fresh(target.script, r, key, depth - 1) or _new_local(
                target.script, target.func, r, key, depth - 1) for r in returns):
            return True
    return False


def _new_local(script: Script, func: ast.AST, value: ast.expr, key: str, depth: int) -> bool:
    """``m = Net(); ...; return m`` in a builder: the returned name holds a new module."""
    if not isinstance(value, ast.Name):
        return False
    values = [n.value for n in walk_local(func) if isinstance(n, ast.Assign) and
              any(isinstance(t, ast.Name) and t.id == value.id for t in n.targets)]
    return bool(values) and all(_fresh(script, v, key, depth) for v in values)


def _after(stmt: ast.stmt) -> Iterator[ast.stmt]:
    """The statements that run after ``stmt`` in its function (or module), in order: the rest
    of its block, then the rest of each enclosing block."""
    n: ast.AST = stmt
    while not isinstance(n, (*SCOPES, ast.Module)):
        p = parent(n)
        if p is None:
            return
        for field in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(p, field, None)
            if isinstance(block, list) and n in block:
                yield from block[block.index(n) + 1:]
        n = p


def _rebuilds(script: Script, stmt: ast.stmt, opt: str, depth: int = 2) -> bool:
    """``stmt`` gives ``opt`` new parameters: assigns it, adds a param group, loads a state, or
    calls a function or method of the file that does (``self._make_optimizer()``)."""
    for n in [stmt, *walk_local(stmt)]:
        if isinstance(n, ast.Call) and depth > 0 and _callee_rebuilds(script, n, opt, depth):
            return True
        if isinstance(n, ast.Assign) and any(
                script.key(t) == opt or isinstance(t, ast.Subscript) and
                script.key(t.value) == f"{opt}.param_groups" or
                isinstance(t, ast.Subscript) and isinstance(t.value, ast.Subscript)
                and script.key(t.value.value) == f"{opt}.param_groups" for t in n.targets):
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                n.func.attr in ("add_param_group", "load_state_dict") and \
                script.key(n.func.value) == opt:
            return True
    return False


def _callee_rebuilds(script: Script, call: ast.Call, opt: str, depth: int) -> bool:
    head, _, rest = opt.partition(".")
    recv = script.key(call.func.value) if isinstance(call.func, ast.Attribute) else None
    inner = f"self.{rest}" if rest and recv == head else opt
    for target in script.graph.targets(call):
        if target.script is script and any(
                _rebuilds(script, s, inner, depth - 1) for s in target.func.body):
            return True
    return False


def _reads(script: Script, stmt: ast.stmt, key: str) -> bool:
    """``stmt`` reads ``key``, or, for a module-level name, calls a module-level function of
    the file that reads it as a global (a notebook's ``def train(...)`` using ``rnn`` and
    ``optimizer``)."""
    if any(isinstance(n, (ast.Name, ast.Attribute)) and
           isinstance(getattr(n, "ctx", None), ast.Load) and script.key(n) == key
           for n in [stmt, *walk_local(stmt)]):
        return True
    if "." in key or script.enclosing_function(stmt) is not None:
        return False
    for call in [stmt, *walk_local(stmt)]:
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
            defs = script.functions.get(call.func.id, [])
            if len(defs) == 1 and isinstance(parent(defs[0]), ast.Module) and \
                    _global_read(defs[0], key):  # type: ignore[arg-type]
                return True
    return False


def _global_read(func: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    """``func`` reads ``name`` and never binds it locally (so it reads the module's)."""
    params = {a.arg for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]}
    if name in params:
        return False
    read = False
    for n in ast.walk(func):
        if isinstance(n, ast.Name) and n.id == name:
            if not isinstance(n.ctx, ast.Load):
                return False
            read = True
    return read


def _stepped_after(script: Script, rebinding: ast.stmt, opt: str, model: str) -> ast.AST | None:
    """The first step of ``opt`` after ``rebinding`` in its scope, reached with ``opt`` and the
    rebound ``model`` named there and nothing rebuilding ``opt`` first."""
    used = False
    for stmt in _after(rebinding):
        if _rebuilds(script, stmt, opt) or any(
                isinstance(n, ast.Assign) and any(script.key(t) == model for t in n.targets)
                for n in [stmt, *walk_local(stmt)]):
            return None
        used = used or _reads(script, stmt, model) or model.startswith("self.")
        if not (used and (_reads(script, stmt, opt) or opt.startswith("self."))):
            continue  # a name the scope does not hand on may be a callee's own optimizer
        for e in events(script, [stmt]):
            if e.kind == "step" and e.key == opt:
                return e.site
    return None


def _copy_rebinding(script: Script, node: ast.Assign) -> Stale | None:
    """``clone = copy.copy(self); clone.net = <new module>``: the shallow copy shares the
    original's optimizer, which holds the original's ``net``. Fires when the class steps that
    optimizer somewhere and the function gives ``clone`` no optimizer of its own."""
    t = node.targets[0]
    if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and
            t.value.id != "self"):
        return None
    func = script.enclosing_function(node)
    if func is None or not any(
            isinstance(n, ast.Assign) and any(isinstance(x, ast.Name) and x.id == t.value.id
                                              for x in n.targets) and
            isinstance(n.value, ast.Call) and
            (script.call_qualname(n.value) or "") in ("copy.copy", "copy")
            for n in walk_local(func)):
        return None
    graph = script.graph
    classes = graph.types(t.value)
    if len(classes) != 1 or classes[0].script is not script:
        return None
    cls = classes[0].node
    attr = f"self.{t.attr}"
    for opt in sorted(script.optimizers):
        if not opt.startswith("self.") or attr not in (held_modules(script, opt) or ()):
            continue
        if not _fresh(script, node.value, f"{t.value.id}.{t.attr}"):
            continue
        clone_opt = f"{t.value.id}.{opt[5:]}"
        if any(_rebuilds(script, s, clone_opt) for s in _after(node)):
            continue
        step = next((c for c in ast.walk(cls) if isinstance(c, ast.Call) and
                     isinstance(c.func, ast.Attribute) and c.func.attr == "step" and
                     script.key(c.func.value) == opt), None)
        if step is not None:
            return node, clone_opt, f"{t.value.id}.{t.attr}", step, True
    return None
