"""Where an optimizer's ``step()`` is written: for findings about a step that never runs.

An optimizer whose ``step()`` never runs leaves no call to report at; the line to change is the
``step()`` the user wrote for it (behind a condition that is never true, in a branch never taken).
:func:`find_step_site` looks for it in the functions that are running when a backward starts: in
each user frame (innermost first, a few at most), the calls ``X.step(...)`` written in that
frame's function (or module) body, outside nested functions and classes, whose receiver ``X`` --
or first argument, as in ``scaler.step(optimizer)`` -- is the optimizer itself. Receivers are
resolved from the frame's own variables without running user code: names, attribute chains read
from instance and class dictionaries (``self.optimizer``, ``self.opts.d``) and constant
subscripts of dicts, lists and tuples (``optimizers["critic"]``); properties and anything else
are not evaluated.

Cost: one parse per file (cached by ``bounds.parse_file``) and one walk of the enclosing function
per frame; callers use it on rare paths only (before an optimizer's first step).
"""

from __future__ import annotations

import ast
import linecache
import re
import sys
from types import FrameType
from typing import Any

from trainguard.sanitize.core.frames import Location, user_frames
from trainguard.sanitize.core.source import function_node

__all__ = ["StepSite", "find_step_site", "frame_value"]

_FRAMES = 4  # user frames searched, innermost first
_MISSING = object()
_STEP_TEXT = re.compile(r"\.[\s\\]*step\b")
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_STEPPING = frozenset({"step", "zero_grad", "unscale_", "update", "clip_grad_norm_",
                       "clip_grad_value_"})


class StepSite:
    """A ``step()`` call written for an optimizer.

    Attributes:
        where: ``(path, line, col)`` of the call (column 1-based).
        text: the call as written (``optimizer.step()``), shortened.
        guard: ``(line, test text, column)`` of the innermost ``if``/``while`` whose body or
            ``else`` holds the call inside its function and decides whether it runs, or None;
            the column (1-based) is 0 unless that branch only steps (``_guard``).
    """

    __slots__ = ("where", "text", "guard")

    def __init__(self, where: Location, text: str, guard: tuple[int, str] | None) -> None:
        self.where = where
        self.text = text
        self.guard = guard


def find_step_site(optimizer: Any, start: FrameType | None = None) -> StepSite | None:
    """The ``step()`` call for ``optimizer`` written in a running user function (innermost
    first; ``start`` defaults to the caller's frame), or None when none is found.

    A site in a function of another file than its caller's (a backend wrapper's ``backward()``
    that steps the optimizer itself only for an engine that owns the step, huggingface/
    transformers#45656) serves every caller: when a caller further out writes its own
    ``step()`` for the optimizer (the training loop's), that one is the site."""
    frame = start if start is not None else sys._getframe(1)
    frames = list(user_frames(frame, limit=_FRAMES))
    found = None
    for i, f in enumerate(frames):
        site = _site_in(optimizer, f)
        if site is None:
            continue
        caller = frames[i + 1] if i + 1 < len(frames) else None
        if caller is None or caller.f_code.co_filename == f.f_code.co_filename:
            return site
        found = found or site  # a helper file's: kept unless a caller writes its own
    return found


def _site_in(optimizer: Any, f: FrameType) -> StepSite | None:
    """The first ``step()`` call for ``optimizer`` written in the function ``f`` runs."""
    body = function_node(f.f_code)
    if body is None or not _may_step(f.f_code.co_filename, body):
        return None
    for call, parents in _step_calls(body):
        if _is(optimizer, call.func.value, f) or (
                call.args and _is(optimizer, call.args[0], f)):
            where = (f.f_code.co_filename, call.lineno, call.col_offset + 1)
            return StepSite(where, _text(call), _guard(parents, call))
    return None


def _may_step(path: str, body: ast.AST) -> bool:
    """Whether the source text of ``body`` holds ``.step`` at all (an attribute ``step`` read
    with a dot, the dot and the name maybe on separate lines): when it does not, no
    ``X.step(...)`` is written there and the walk is skipped (a trainer's own loop in a library:
    the user's functions on the stack call ``trainer.fit`` only)."""
    lines = linecache.getlines(path)
    first = getattr(body, "lineno", 1) - 1
    last = getattr(body, "end_lineno", None) or len(lines)
    return _STEP_TEXT.search("".join(lines[first:last])) is not None


def _step_calls(body: ast.AST) -> list[tuple[ast.Call, list[ast.AST]]]:
    """The ``X.step(...)`` calls in ``body``, outside nested functions and classes, each with its
    ancestors inside ``body`` (outermost first)."""
    out: list[tuple[ast.Call, list[ast.AST]]] = []
    todo: list[tuple[ast.AST, list[ast.AST]]] = [
        (child, []) for child in ast.iter_child_nodes(body)]
    while todo:
        node, parents = todo.pop()
        if isinstance(node, _SCOPES):
            continue
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "step"):
            out.append((node, parents))
        todo.extend((child, [*parents, node]) for child in ast.iter_child_nodes(node))
    out.sort(key=lambda c: (c[0].lineno, c[0].col_offset))
    return out


def _is(optimizer: Any, node: ast.AST, frame: FrameType) -> bool:
    return frame_value(node, frame) is optimizer


def frame_value(node: ast.AST, frame: FrameType) -> Any:
    """The value of a name, attribute chain or constant subscript in ``frame``, read from
    dictionaries only (no property, ``__getattr__`` or ``__getitem__`` of user classes runs);
    ``_MISSING`` when it cannot be read that way."""
    if isinstance(node, ast.Name):
        for scope in (frame.f_locals, frame.f_globals):
            if node.id in scope:
                return scope[node.id]
        return _MISSING
    if isinstance(node, ast.Attribute):
        owner = frame_value(node.value, frame)
        if owner is _MISSING:
            return _MISSING
        found = getattr(owner, "__dict__", None)
        if isinstance(found, dict) and node.attr in found:
            return found[node.attr]
        for cls in type(owner).__mro__:
            if node.attr in vars(cls):
                value = vars(cls)[node.attr]
                return _MISSING if hasattr(value, "__get__") else value
        return _MISSING
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        owner = frame_value(node.value, frame)
        if type(owner) in (dict, list, tuple):
            try:
                return owner[node.slice.value]
            except (KeyError, IndexError, TypeError):
                return _MISSING
    return _MISSING


def _guard(parents: list[ast.AST], call: ast.Call) -> tuple[int, str, int] | None:
    """``(line, test text, column)`` of the innermost ``if``/``while`` that decides whether the
    call runs (one whose other branch steps too, ``if scaler: scaler.step(opt) else:
    opt.step()``, decides only how), with column 0 unless the branch holding the call only
    steps: then the test is the step's own condition, the line to change, and the column is the
    statement's (1-based)."""
    chain = [*parents, call]
    for i in range(len(parents) - 1, -1, -1):
        node = parents[i]
        if not isinstance(node, (ast.If, ast.While)):
            continue
        held = node.body if chain[i + 1] in node.body else node.orelse
        other = node.orelse if held is node.body else node.body
        if isinstance(node, ast.If) and any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr == "step" for s in other for n in ast.walk(s)):
            continue
        return node.lineno, _short(node.test), node.col_offset + 1 if _steps_only(held) else 0
    return None


def _steps_only(block: list[ast.stmt]) -> bool:
    """Whether ``block`` only steps: statements that call ``X.step()``, ``zero_grad``, a
    ``GradScaler``'s ``unscale_``/``update`` or gradient clipping, counters that call nothing
    (``global_step += 1``), and ``if``s of such. A block that also does other work (an
    evaluation, a log line) is that work's, and the step was put in it."""
    for stmt in block:
        if isinstance(stmt, ast.If):
            if not _steps_only(stmt.body) or not _steps_only(stmt.orelse):
                return False
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            func = stmt.value.func
            if (func.attr if isinstance(func, ast.Attribute) else
                    getattr(func, "id", "")) not in _STEPPING:
                return False
        elif any(isinstance(n, ast.Call) for n in ast.walk(stmt)):
            return False
    return True


def _text(node: ast.AST) -> str:
    return _short(node)


def _short(node: ast.AST, limit: int = 60) -> str:
    try:
        text = ast.unparse(node)
    except (ValueError, AttributeError, RecursionError):
        return "..."
    return text if len(text) <= limit else text[:limit - 3] + "..."
