"""Whether a ``train()`` call ran once before the loop whose later iterations train in eval mode.

TG102's commonest cause is a place, not the ``eval()``: ``model.train()`` is called once before the
epoch loop and an evaluation inside the loop (inline, a ``validate()`` helper, a callback's
``on_epoch_end``) calls ``model.eval()``, so every step after the first evaluation runs in eval
mode (pytorch/tutorials#1624). The place to change is the top of that loop: ``train()`` belongs
there, at the start of each epoch (the one before the loop can stay). Three stacks decide it
(see :mod:`.callstack`; entries hold frame ids and code objects, never frames), with the
function's source:

- the ``train()`` call's frame F is still running at the eval-mode step (its stack is a prefix of
  the step's), and the ``eval()`` ran while it was (the ``eval()``'s stack shares F too);
- in F, the innermost loop X holding both the line that leads to the step and the line that led
  to the ``eval()`` does not hold the ``train()`` (it ran once, before X);
- the steps run in a loop of their own inside X that the evaluation is not part of (a batch loop in
  F, a comprehension, or a loop in a function F's loop calls: ``train_one_epoch()``), so X is an
  epoch loop. Without one, the evaluation runs among the steps (a callback every N steps, a
  ``backbone.eval()`` before each step) and the ``eval()`` that is never undone is the line to
  change: ``train()`` is not moved.
"""

from __future__ import annotations

import ast
from typing import Any, Optional

from trainguard.sanitize.core.callstack import Location, Stack, shared_depth
from trainguard.sanitize.core.source import SourceFile

__all__ = ["loop_apart", "loop_depth", "train_once_before"]

_LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp,
          ast.GeneratorExp)
_COMPREHENSIONS = frozenset(("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"))
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.Module)


def train_once_before(train: Stack, evaluation: Stack,
                      step: Stack) -> Optional[tuple[Location, Location]]:
    """``(the train() call's location, the location of the loop it ran before)`` when the
    ``train()`` whose user stack is ``train`` ran once before a loop that holds both the
    evaluation (whose ``eval()`` stack is ``evaluation``) and a loop of steps (``step``: the
    eval-mode step's stack); None otherwise."""
    i = len(train) - 1
    if i < 0 or shared_depth(train, step) != i or shared_depth(evaluation, step) < i:
        return None
    code, train_line = train[i][1], train[i][2][1]
    step_line, eval_line = step[i][2][1], evaluation[i][2][1]
    loops = _Loops.of(step[i][2][0], code)
    if loops is None:
        return None
    outer = loops.around(step_line, eval_line)
    if outer is None or _holds(outer, train_line):
        return None
    if not _steps_loop_apart(step, evaluation):
        return None
    return train[i][2], (train[i][2][0], outer.lineno, outer.col_offset + 1)


def _steps_loop_apart(step: Stack, evaluation: Stack) -> bool:
    """Whether the step runs in a loop the evaluation is not part of: in the deepest frame both
    stacks share, a loop around the step's line but not the evaluation's, or any loop (or
    comprehension) around the step in a frame past that one."""
    d = shared_depth(step, evaluation)
    if d < 0:
        return False
    loops = _Loops.of(step[d][2][0], step[d][1])
    if loops is not None and loops.apart(step[d][2][1], evaluation[d][2][1]):
        return True
    for _, code, where, _ in step[d + 1:]:
        if code.co_name in _COMPREHENSIONS:
            return True
        loops = _Loops.of(where[0], code)
        if loops is not None and loops.around(where[1], where[1]) is not None:
            return True
    return False


def loop_depth(stack: Stack) -> int:
    """How many loops (``for``, ``while``, comprehensions) hold the lines running in the frames
    of ``stack``, over all its frames: 2 for a step in a batch loop inside an epoch loop, also when
    the loops sit in different functions (``fit()`` looping over epochs and calling
    ``train_one_epoch()``)."""
    depth = 0
    for _, code, where, _ in stack:
        if code.co_name in _COMPREHENSIONS:
            depth += 1
        loops = _Loops.of(where[0], code)
        if loops is not None:
            depth += sum(1 for n in loops.loops if _holds(n, where[1]))
    return depth


def loop_apart(path: str, code: Any, one: int, other: int) -> Optional[int]:
    """The first line of the outermost loop of the function whose code object is ``code`` that
    holds line ``one`` but not line ``other`` (an epoch loop around a batch loop), or None."""
    loops = _Loops.of(path, code)
    held = [n for n in loops.loops if _holds(n, one) and not _holds(n, other)] if loops else []
    return min(n.lineno for n in held) if held else None


def _holds(node: ast.AST, line: int) -> bool:
    return node.lineno <= line <= (node.end_lineno or node.lineno)


class _Loops:
    """The loops (``for``, ``while``, comprehensions) of one function's own body."""

    _cache: dict[tuple[str, str, int], Optional["_Loops"]] = {}

    def __init__(self, loops: list[ast.AST]) -> None:
        self.loops = loops

    @classmethod
    def of(cls, path: str, code: Any) -> Optional["_Loops"]:
        """The loops of the function (or module) whose code object is ``code`` in ``path``; None
        without source. Cached per function."""
        key = (path, code.co_name, code.co_firstlineno)
        if key in cls._cache:
            return cls._cache[key]
        found = None
        file = SourceFile.load(path)
        if file is not None:
            scope = _scope_node(file, code)
            if scope is not None:
                found = cls([n for n in file.parents if isinstance(n, _LOOPS)
                             and file.scope(n) is scope])
        if len(cls._cache) > 256:
            cls._cache.clear()
        cls._cache[key] = found
        return found

    def around(self, one: int, other: int) -> Optional[ast.AST]:
        """The innermost loop holding both lines, or None."""
        held = [n for n in self.loops if _holds(n, one) and _holds(n, other)]
        return max(held, key=lambda n: n.lineno, default=None) if held else None

    def apart(self, one: int, other: int) -> bool:
        """Whether a loop holds line ``one`` but not line ``other``."""
        return any(_holds(n, one) and not _holds(n, other) for n in self.loops)


def _scope_node(file: SourceFile, code: Any) -> Optional[ast.AST]:
    """The ``def`` (or the module) whose code object is ``code``: by name and first line (the
    first decorator's line for a decorated function)."""
    if code.co_name == "<module>":
        return next((n for n in file.parents.values() if isinstance(n, ast.Module)), None)
    for node in file.parents:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if first == code.co_firstlineno:
                return node
    return None
