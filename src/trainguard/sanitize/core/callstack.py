"""The user's call stack at a mode change, a backward or a model call, and where two stacks part.

The mode checks (TG101, TG102) report at the cause: the line to change so that the model is in the
right mode. When a call is missing (no ``model.eval()`` before an evaluation, no ``model.train()``
after a validation that put the model in eval mode) the cause is a place, not a call, and the
place follows from two stacks: the one where the model was put in its mode (or trained) and the
one where the wrong-mode forward ran. The deepest frame both share is the code that runs both
phases (a training loop with a validation call in it, ``fit()`` calling ``train_epoch()`` and
``validate()``, a notebook's top level); the line that frame was executing toward the second
stack is where the missing call belongs:

- a helper that put the model in eval mode and never restored it (TG102 reports where the
  helper returns, :func:`function_end`, and names this line in its message; a helper that only
  switches modes, :func:`sets_modes_only`, at this line): the line in the training loop that
  called it (``validate(model)``), or the ``eval()`` when training and validation share one
  frame;
- an evaluation run in training mode: at a script's (or notebook's) top level, whose statements
  run once and in order, when training happened there too, the statement that started the
  evaluation (``index = build_index(model, docs)`` after the training cell; ``model.eval()`` goes
  before it); inside a function that runs both phases (``main()``, ``fit()``, an epoch loop), or
  when training set its mode in a function of its own (an estimator's ``fit()``), the evaluation's
  own function (``evaluate()``, a validation callback's ``on_epoch_end``, the ``predict_proba``
  whose ``no_grad`` block holds the forward), at the statement of its body that holds the
  forward (the loop or ``no_grad`` block, before which ``eval()`` goes), past comprehensions, but
  not into a method of the model itself (``model.generate(...)`` is the line to precede).

A stack is a tuple of ``(id(frame), code, location, the frame is a method of an nn.Module)`` for
user frames, outermost first; no frame is kept (frames hold the user's tensors). A frame's id is reused once the frame is gone, so a shared
entry may be an earlier call of the same function from the same place: for the purpose here (the
function whose code runs both phases) that is the same answer.
"""

from __future__ import annotations

import ast
import sys
from types import CodeType, FrameType
from typing import Any, Optional

from trainguard.placement import return_line
from trainguard.placement import sets_modes_only as modes_only
from trainguard.placement import body_statement, setup_start, stretch_apart
from trainguard.sanitize.core.bounds import FRAMES, parse_file
from trainguard.sanitize.core.frames import (Location, frame_location, is_user_code, user_frame,
                                             user_frames)
from trainguard.sanitize.core.hook_calls import dispatched
from trainguard.sanitize.core.source import SourceFile, function_node

__all__ = ["Location", "Stack", "user_stack", "shared_depth", "cause_line", "dispatched",
           "callers", "differing", "line_of", "callers_train", "model_method_caller",
           "running_line", "in_module_init", "function_end", "sets_modes_only",
           "grad_off_site", "body_statement", "discarded_no_grad", "no_grad_block_line",
           "evaluates_without_grad", "under_no_grad", "no_grad_reason", "disables_grad"]

Stack = tuple[tuple[int, CodeType, Location, bool], ...]
_COMPREHENSIONS = frozenset(("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"))


def user_stack(start: Optional[FrameType] = None, *, methods: bool = False) -> Stack:
    """The user frames from ``start`` (default: the caller) outwards, at most
    :data:`~trainguard.sanitize.core.bounds.FRAMES`, returned outermost first. With ``methods``,
    each entry says whether its frame runs a method of an ``nn.Module`` (reads the frame's
    ``self``: a rare path only)."""
    frame = start if start is not None else sys._getframe(1)
    found = [(id(f), f.f_code, frame_location(f), methods and _module_method(f))
             for f in user_frames(frame, limit=FRAMES)]
    found.reverse()
    return tuple(found)


def _module_method(frame: FrameType) -> bool:
    if "self" not in frame.f_code.co_varnames[:max(frame.f_code.co_argcount, 1)]:
        return False
    from torch import nn

    return isinstance(frame.f_locals.get("self"), nn.Module)


def in_module_init(start: Optional[FrameType], *, depth: int = 12) -> bool:
    """Whether an ``nn.Module``'s ``__init__`` is among the ``depth`` frames from ``start``
    outwards: a call made while a model is being built (a dummy forward sizing a layer,
    ``n = self._features(torch.zeros(1, 1, bands, 5, 5)).numel()``), never an evaluation."""
    frame = start
    while frame is not None and depth > 0:
        if frame.f_code.co_name == "__init__" and _module_method(frame):
            return True
        frame, depth = frame.f_back, depth - 1
    return False


def model_method_caller(module: Any, start: Optional[FrameType] = None) -> tuple | None:
    """Where user code called into a model whose own method made an outermost call of ``module``.

    ``model.get_context(x)`` runs ``self.embed(x)`` and ``self.gru(z)`` inside the model's
    method, so each of those is an outermost call made at a line of the model's code; the line to
    change is the one that called ``get_context``. From the first user frame at or above
    ``start`` (default: the caller), while a frame runs a method of an ``nn.Module`` that is or
    holds ``module`` and its caller is user code, step out (a method calling another method of
    the same model, a wrapper model's method calling the inner model's). A method that a library
    calls (Lightning's ``validation_step``) is kept: its line is the user's.

    Returns ``(location, owner, method name)`` of the outermost step, or None when the call was
    not made inside such a method. Reads frames' ``self`` and walks ``owner.modules()``: a rare
    path only.
    """
    from torch import nn

    frame = user_frame(start if start is not None else sys._getframe(1))
    found = None
    for _ in range(FRAMES):
        if frame is None:
            break
        code = frame.f_code
        owner = (frame.f_locals.get("self") if "self" in code.co_varnames[:max(code.co_argcount, 1)]
                 else None)
        if not isinstance(owner, nn.Module) or not (
                owner is module or any(m is module for m in owner.modules())):
            break
        outer = frame.f_back
        if outer is None or not is_user_code(outer.f_code):
            break
        found = (frame_location(outer), owner, code.co_name)
        frame, module = outer, owner
    return found


def shared_depth(one: Stack, other: Stack) -> int:
    """The index of the deepest frame ``one`` and ``other`` share from the outermost (-1: none)."""
    depth = -1
    for a, b in zip(one, other):
        if a[0] != b[0] or a[1] is not b[1]:
            break
        depth += 1
    return depth


def cause_line(at: Stack, ref: Stack, *, into_phase: bool = False,
               past_dispatch: bool = False, dispatch_below: bool = False) -> Location | None:
    """The line of ``at`` in the deepest frame it shares with ``ref``.

    With ``into_phase``, the line inside the function ``at``'s phase runs in (at a script's top
    level too: a notebook loop calling an ``estimate_loss()`` helper is reported in the helper): of the frames past the shared one (comprehensions
    skipped, up to the first method of the model, which ``at`` marks when made with
    ``methods=True``, and up to the first one in another file: a helper module's function serves
    every caller; a method of the model whose line opens the ``no_grad`` block around the model
    call, a policy's ``predict()``, is taken instead: its callers all go through it), the
    outermost whose line sits in a ``no_grad``/``inference_mode`` region
    of its own function (the evaluation code: ``predict_proba`` under ``score()``), else the
    first; of that frame's function, the statement at the top of its body that holds the line
    (:func:`statement_start`: where a call for that stretch goes). With ``past_dispatch``, a
    shared frame's line that dispatches a hook to each item of a collection (:func:`dispatched`)
    gives way to the callee's line; with ``dispatch_below`` too, a dispatch in a function past
    the shared frame (an engine's ``fire(event)``). None when the stacks share no frame.
    """
    depth = shared_depth(at, ref)
    if depth < 0:
        return None
    if dispatch_below:  # (the loop fires each event at its time, the callback chose the event)
        depth = max((d for d in range(depth, len(at) - 1) if dispatched(at[d][2])),
                    default=depth)
    while past_dispatch and depth + 1 < len(at) and dispatched(at[depth][2]):
        depth += 1  # into the callback: its own line is the one to change
    if into_phase and under_no_grad(at[depth][2]):
        # the evaluation is written in the shared frame itself (a ``with torch.no_grad():`` loop
        # calling a helper that training calls too): its statement there, not inside the helper
        # (within a statement that holds the training too, the block that does not: an epoch's
        # validation after its batches; the line itself when none does)
        return statement_start(at[depth][1], at[depth][2][1], avoid=ref[depth][2][1]) or \
            at[depth][2]
    if into_phase:
        phase = []
        for entry in at[depth + 1:]:
            if entry[3] and no_grad_reason(entry[2]) == entry[2]:
                phase = [entry]  # the model's own ``predict()`` opening a no_grad block, also
                break  # when the user's evaluation function calls it: it serves every caller
            if entry[3] or (phase and entry[2][0] != phase[0][2][0]):
                break  # a method of the model, or a helper module's code
            if entry[1].co_name not in _COMPREHENSIONS:
                phase.append(entry)
        if phase:
            entry = next((e for e in phase if under_no_grad(e[2])), phase[0])
            return statement_start(entry[1], entry[2][1]) or entry[2]
    return at[depth][2]


def no_grad_block_line(at: Stack, ref: Stack) -> Location | None:
    """The line of ``at``, from the deepest frame it shares with ``ref`` inwards, that sits in a
    ``with torch.no_grad():`` (or ``inference_mode()``, ``set_grad_enabled(False)``) block of
    its own function: the outermost such, where the block that turned grad off for the rest of
    ``at`` took in the call (``predict = model(feats)`` inside a feature helper's no_grad block).
    None when no frame's line is in one (a decorated helper) or the stacks share no frame."""
    depth = shared_depth(at, ref)
    if depth < 0:
        return None
    return next((e[2] for e in at[depth:] if no_grad_reason(e[2]) == e[2]), None)


def statement_start(code: CodeType, line: int, avoid: int | None = None) -> Location | None:
    """The statement of the function ``code`` runs, at the top of its body, that holds ``line``
    (the ``for`` loop or ``with torch.no_grad():`` block an evaluation's forward runs in), or
    the first of the statements right before it that set up accumulators (``total, correct =
    0, 0``; :func:`trainguard.placement.setup_start`): where a call meant for that stretch
    belongs (``model.eval()``: one place for every forward in it); at a script's top level, the
    top-level statement; when it holds the line ``avoid`` too, the block inside it that does not
    (:func:`trainguard.placement.stretch_apart`). None for a function not found."""
    node = parse_file(code.co_filename) if code.co_name == "<module>" else function_node(code)
    body = getattr(node, "body", None) or []
    body, stmt = stretch_apart(body, line, avoid) if avoid else (body, body_statement(body, line))
    if stmt is None:
        return None  # (no such statement, or only its header holds the line)
    stmt = setup_start(body, stmt)  # (before its accumulators' set-up)
    return (code.co_filename, stmt.lineno, stmt.col_offset + 1)


def function_end(code: CodeType) -> Location | None:
    """Where the function ``code`` runs returns after its last statement
    (:func:`trainguard.placement.return_line`). None for a module's code or a function not
    found."""
    node = function_node(code) if code.co_name != "<module>" else None
    line = return_line(node) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
        else None
    return (code.co_filename, line, 1) if line is not None else None


def evaluates_without_grad(code: CodeType) -> bool:
    """Whether the function ``code`` runs is, by the source, an evaluation: decorated with
    ``@torch.no_grad()`` (or ``inference_mode()``) or opening such a ``with`` block in its body
    (a model's ``generate()`` that calls ``self.eval()`` first)."""
    node = function_node(code) if code.co_name != "<module>" else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    return any(disables_grad(d) for d in node.decorator_list) or any(
        isinstance(n, (ast.With, ast.AsyncWith)) and
        any(disables_grad(item.context_expr) for item in n.items) for n in ast.walk(node))


def sets_modes_only(code: CodeType) -> bool:
    """Whether the function ``code`` runs only switches modes
    (:func:`trainguard.placement.sets_modes_only`). False for a module's code or a function not
    found."""
    node = function_node(code) if code.co_name != "<module>" else None
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and modes_only(node)


_CHECKPOINT = ("torch/utils/checkpoint.py", "torch\\utils\\checkpoint.py")
_REENTRANT = "a reentrant checkpoint (use_reentrant=True) whose inputs do not require grad"


def grad_off_site(start: Optional[FrameType]) -> tuple[str, Optional[Location]]:
    """Where grad was turned off for an op whose innermost frame is ``start``: the user's call of
    ``torch.utils.checkpoint`` when the op runs inside a reentrant checkpoint (it runs the
    function under ``no_grad`` and, when no input requires grad, returns an output without
    ``grad_fn``: the checkpoint docs' warning "None of the inputs have requires_grad=True");
    else the innermost user frame that sits in a ``no_grad`` block or decorated function (the
    ``feats = encode(obs)`` under ``with torch.no_grad():``, not the model's forward it
    reached); else the op's user line. With the cut's name: ``no_grad``, or the checkpoint's."""
    frame, inside = start, False
    for _ in range(FRAMES):
        if frame is None:
            break
        if inside and is_user_code(frame.f_code):
            return _REENTRANT, frame_location(frame)
        inside = inside or frame.f_code.co_filename.endswith(_CHECKPOINT)
        frame = frame.f_back
    first = user_frame(start)
    found = next((reason for f in user_frames(first, limit=16)
                  if (reason := no_grad_reason(frame_location(f))) is not None), None)
    return "no_grad", found or (frame_location(first) if first is not None else None)


def under_no_grad(where: Location) -> bool:
    """Whether the call at ``where`` sits, by the source, in a ``with torch.no_grad()`` (or
    ``inference_mode()``, ``set_grad_enabled(False)``) block or a function decorated with one."""
    return no_grad_reason(where) is not None


def no_grad_reason(where: Location) -> Optional[Location]:
    """For a call at ``where`` under no_grad by the source: ``where`` itself inside a ``with``
    block, the decorator's line in a function decorated with ``@torch.no_grad()`` (the line to
    change: a constraint module's decorated forward, denfed/leaf-audio-pytorch#3); else None."""
    file = SourceFile.load(where[0])
    node = file.call_at(where[1], where[2] - 1) if file is not None else None
    if node is None and file is not None:  # an op that is no call: ``kernel[:, 0]``
        node = next((n for n in file.parents if getattr(n, "lineno", None) == where[1] and
                     getattr(n, "col_offset", None) == where[2] - 1), None)
    cur = file.parents.get(node) if node is not None else None
    while cur is not None:
        if isinstance(cur, (ast.With, ast.AsyncWith)):
            if any(disables_grad(item.context_expr) for item in cur.items):
                return where
        elif isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            off = next((d for d in getattr(cur, "decorator_list", ()) if disables_grad(d)), None)
            return (where[0], off.lineno, off.col_offset + 1) if off is not None else None
        cur = file.parents.get(cur)
    return None


def discarded_no_grad(frame: Optional[FrameType]) -> Optional[Location]:
    """The line of a ``torch.no_grad()`` (or ``inference_mode()``) made as a statement of its
    own before the line ``frame`` runs, in its own function: the context object is dropped
    unentered, so grad mode never changed for the code after it (the line to change is that
    statement; ``set_grad_enabled(False)`` acts at once and is not one). None when none."""
    if frame is None:
        return None
    node = function_node(frame.f_code)
    if node is None:
        return None
    todo, found = list(getattr(node, "body", ())), None
    while todo:
        cur = todo.pop()
        if isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue  # (another function's code)
        if isinstance(cur, ast.Expr) and isinstance(cur.value, ast.Call) and \
                _call_name(cur.value) in ("no_grad", "inference_mode") and \
                cur.lineno < frame.f_lineno and \
                (found is None or cur.lineno > found.lineno):
            found = cur
        todo.extend(n for n in ast.iter_child_nodes(cur) if isinstance(n, ast.stmt))
    return (frame.f_code.co_filename, found.lineno, found.col_offset + 1) if found else None


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def disables_grad(expr: ast.AST) -> bool:
    func = expr.func if isinstance(expr, ast.Call) else expr
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name in ("no_grad", "inference_mode"):
        return True
    return (name == "set_grad_enabled" and isinstance(expr, ast.Call) and bool(expr.args)
            and isinstance(expr.args[0], ast.Constant) and expr.args[0].value is False)


def callers(where: Any, frame: Optional[FrameType], depth: int = 6) -> tuple | None:
    """The user lines that called the function holding the model call at ``where`` (found from
    ``frame`` outwards), innermost first (at most ``depth``); None when the call is made at a
    script's top level."""
    for _ in range(64):  # up to the user's frame that made the model call
        if frame is None:
            return None
        if is_user_code(frame.f_code) and frame_location(frame) == where:
            break
        frame = frame.f_back
    else:
        return None
    if frame.f_code.co_name == "<module>":
        return None
    found = []
    frame = frame.f_back
    while frame is not None and len(found) < depth:
        if is_user_code(frame.f_code):
            found.append(frame_location(frame))
        frame = frame.f_back
    return tuple(found) if found else None


def differing(chain: tuple, others: Any) -> Any:
    """The innermost of ``chain`` that no chain in ``others`` has at the same place."""
    for i, loc in enumerate(chain):
        if all(len(other) <= i or other[i] != loc for other in others):
            return loc
    return chain[0]


def line_of(loc: Any) -> str:
    return f"line {loc[1]}" if loc else "elsewhere"


def callers_train(sites: Any, frame: Optional[FrameType], cache: dict) -> bool:
    """Whether a user line among the (at most 6) callers of the function whose model call is the
    first user frame from ``frame`` sits in a training iteration (``Uses.trains`` from the
    :class:`~trainguard.sanitize.core.sites.SiteReader` ``sites``); cached in ``cache`` per model
    call site and first caller line."""
    user = [f for _, f in zip(range(8), user_frames(frame))]
    if len(user) < 2:
        return False
    key = (frame_location(user[0]), frame_location(user[1]))
    known = cache.get(key)
    if known is None:
        known = any(found is not None and found.trains
                    for found in (sites.uses(frame_location(f)) for f in user[1:7]))
        if len(cache) > 4096:
            cache.clear()
        cache[key] = known
    return known


def running_line(where: Location) -> bool:
    """Whether the line ``where`` belongs to a user function running now (on the stack)."""
    for frame in user_frames(sys._getframe(1)):
        code = frame.f_code
        if code.co_filename == where[0] and any(
                line == where[1] for _, _, line in code.co_lines()):
            return True
    return False
