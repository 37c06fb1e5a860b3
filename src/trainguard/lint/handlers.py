"""Event handlers of a training engine: which function runs at which point of the run.

pytorch-ignite's ``Engine`` and the engines written after it run a step function once per
iteration and fire named events around it; a handler is attached with a decorator
(``@trainer.on(Events.EPOCH_STARTED)``), with ``trainer.add_event_handler(event, fn)`` or with
``trainer.on(event)(fn)``; the handler may be a lambda. The event's name says when it fires
(https://pytorch.org/ignite/generated/ignite.engine.events.Events.html): ``STARTED`` once
before the run, ``EPOCH_STARTED`` before each epoch's iterations, ``ITERATION_STARTED`` and
``ITERATION_COMPLETED`` around each call of the step function, ``EPOCH_COMPLETED`` and
``COMPLETED`` after them. A filtered event (``Events.ITERATION_COMPLETED(every=50)``) fires on
a schedule of its own and is left out.

The engine counts as a trainer when it is built around a step function of the file that steps
an optimizer (``Engine(update)``) or by ``create_supervised_trainer``; its epoch count is the
``max_epochs`` that its ``run`` is given, when the program fixes it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from trainguard.lint.astutil import dotted, kwarg, parent
from trainguard.lint.consts import UNKNOWN, resolve
from trainguard.lint.script import Func, Script

__all__ = ["Handler", "engine_handlers", "handler_body", "BEFORE_STEP", "PER_ITERATION"]

# Events fired before the step function of the iteration they precede has run.
BEFORE_STEP = frozenset({"STARTED", "EPOCH_STARTED", "ITERATION_STARTED"})
PER_ITERATION = frozenset({"ITERATION_STARTED", "ITERATION_COMPLETED"})
_EVENTS = BEFORE_STEP | PER_ITERATION | {"EPOCH_COMPLETED", "COMPLETED"}


@dataclass(frozen=True, slots=True)
class Handler:
    """``func`` runs at ``event`` of the training engine ``engine`` (its key); ``site`` is where
    it is attached (the decorator or the registering call)."""

    event: str
    func: Func | ast.Lambda
    site: ast.Call
    engine: str
    step_function: Func | None  # the engine's step function, when it is one of the file's
    epochs: object  # the ``max_epochs`` of the engine's run, or UNKNOWN


def engine_handlers(script: Script) -> list[Handler]:
    """Every handler attached to a training engine of the file."""
    if "Events" not in script.source and "_STARTED" not in script.source:
        return []
    out = []
    for site, engine, event, target in _registrations(script):
        trains, step_fn = _training_engine(script, engine)
        func = _function(script, target)
        if trains and func is not None:
            out.append(Handler(event, func, site, engine, step_fn, _epochs(script, engine)))
    return out


def _registrations(script: Script):  # type: ignore[no-untyped-def]
    """``(site, engine key, event name, handler expression)`` for each attachment."""
    for call in script.calls:
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr == "on" and len(call.args) == 1:
            event, engine = _event(call.args[0]), script.key(f.value)
            if event is None or engine is None:
                continue
            up = parent(call)
            if isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    call in up.decorator_list:
                yield call, engine, event, up
            elif isinstance(up, ast.Call) and up.func is call and len(up.args) == 1:
                yield call, engine, event, up.args[0]  # trainer.on(Events.X)(fn)
        elif isinstance(f, ast.Attribute) and f.attr == "add_event_handler" and \
                len(call.args) >= 2:
            event, engine = _event(call.args[0]), script.key(f.value)
            if event is not None and engine is not None:
                yield call, engine, event, call.args[1]


def _event(node: ast.AST) -> str | None:
    """``Events.EPOCH_STARTED`` -> ``EPOCH_STARTED``; a filtered event (a call) is None."""
    name = dotted(node)
    last = name.rsplit(".", 1)[-1] if name else None
    return last if last in _EVENTS else None


def handler_body(func: Func | ast.Lambda) -> list[ast.stmt]:
    """The statements a handler runs; a lambda's expression as one statement."""
    if not isinstance(func, ast.Lambda):
        return func.body
    body = getattr(func, "_tg_body", None)
    if body is None:
        stmt = ast.Expr(func.body)
        ast.copy_location(stmt, func.body)
        stmt._tg_parent = func  # type: ignore[attr-defined]
        body = func._tg_body = [stmt]  # type: ignore[attr-defined]
    return body


def _function(script: Script, node: ast.AST) -> Func | ast.Lambda | None:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return node
    name = dotted(node)
    defs = script.functions.get(name.rsplit(".", 1)[-1], []) if name else []
    return defs[0] if len(defs) == 1 else None


def _training_engine(script: Script, engine: str) -> tuple[bool, Func | None]:
    """Whether every value of ``engine`` is an engine whose iteration steps an optimizer, and
    its step function when the file holds it."""
    from trainguard.lint.events import events

    values = script.assignments.get(engine, [])
    if len(values) != 1 or not isinstance(values[0], ast.Call):
        return False, None
    built = values[0]
    if (script.call_qualname(built) or "").endswith("create_supervised_trainer"):
        return True, None
    fn_node = built.args[0] if built.args else kwarg(built, "process_function")
    fn = _function(script, fn_node) if fn_node is not None else None
    if fn is None or isinstance(fn, ast.Lambda):
        return False, None
    return any(e.kind == "step" for e in events(script, fn.body)), fn


def _epochs(script: Script, engine: str) -> object:
    """The ``max_epochs`` every ``engine.run(...)`` of the file passes, when fixed."""
    found = set()
    for call in script.calls:
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr == "run" and script.key(f.value) == engine:
            value = kwarg(call, "max_epochs")
            if value is None and len(call.args) >= 2:
                value = call.args[1]
            v = resolve(script, value) if value is not None else UNKNOWN
            found.add(v if isinstance(v, int) and not isinstance(v, bool) else UNKNOWN)
    return found.pop() if len(found) == 1 else UNKNOWN
