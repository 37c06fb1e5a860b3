"""Where a tensor was made: a short window in which chosen torch functions note the user's line.

A check that has found a fault in a value (a loss fed probabilities) knows the autograd node that
made it but not the line of code: ``grad_fn`` carries no source position unless anomaly mode was
on. :class:`Origin` wraps the few functions that make such values (``F.softmax``,
``Tensor.softmax``, ``torch.sigmoid``, ...) for a short window, from the event that found the
fault to the next one that sees the same kind of value (usually one step): each call notes the
node of its output with the user's line that made it, or, when the call ran inside the
``forward`` of a module the check was told about (``nn.Softmax``, ``nn.Sigmoid``), the user's line
that called that module (``p = self.sigmoid(x)``: the call to drop), or, when library code called
it (inside an ``nn.Sequential``), the line that built that module; a ``TorchFunctionMode``'s or
tensor subclass's ``__torch_function__`` on the way is looked past (it hands the op on). The
window costs one Python call per call of those functions while it is open and nothing once closed;
values are never touched, and the originals are put back at its end.
"""

from __future__ import annotations

import functools
import inspect
import sys
import weakref
from collections import deque
from typing import Any, Callable

from trainguard.sanitize.core import frames
from trainguard.sanitize.core.callstack import cause_line, user_stack
from trainguard.sanitize.core.cuts import assigned_in_init
from trainguard.sanitize.core.source import function_node

__all__ = ["Origin", "Pending", "storage_key"]

_KEPT = 16  # outputs noted per window (the newest kept): their nodes are held until it closes
_FRAMES_UP = 6  # frames above a watched call searched for a module's forward
_CALL_MACHINERY = {"_call_impl", "_wrapped_call_impl", "__call__", "inner"}
# frames of torch's function dispatch between an op and its caller: a ``TorchFunctionMode`` or a
# tensor subclass (an op counter of the user's, trainguard's own traces) hands the op on again
_DISPATCH = {"__torch_function__", "handle_torch_function"}


class Origin:
    """Notes where the outputs of ``functions`` are made while open.

    Args:
        functions: ``(owner, name)`` of the torch callables to watch (``(torch, "sigmoid")``,
            ``(torch.Tensor, "sigmoid")``, ...); each is replaced by a noting wrapper while open.
        built: ``module -> (path, line, col)`` where a module was built, or None; consulted when a
            watched call runs inside a module's ``forward``.
    """

    def __init__(self, functions: tuple[tuple[Any, str], ...],
                 built: Callable[[Any], Any]) -> None:
        self.functions = functions
        self.built = built
        self.noted: deque[tuple[Any, Any, str]] = deque(maxlen=_KEPT)
        # storage key -> the user's stack that made it (outputs made without a graph only)
        self.stacks: dict[tuple, Any] = {}
        self.undo: list[Callable[[], None]] = []
        self.opened_at = -1  # the autograd sequence number when the window opened

    @property
    def open(self) -> bool:
        return bool(self.undo)

    def start(self) -> None:
        """Open the window (no-op when open)."""
        if self.undo:
            return
        self.opened_at = _sequence_now()
        for owner, name in self.functions:
            original = getattr(owner, name, None)
            if original is None:
                continue
            setattr(owner, name, self._wrap(original))
            self.undo.append(lambda owner=owner, name=name, original=original:
                             setattr(owner, name, original))

    def stop(self) -> None:
        """Close the window and drop what was noted. Safe to call more than once."""
        undo, self.undo = self.undo, []
        for action in reversed(undo):
            action()
        self.noted.clear()
        self.stacks.clear()

    def predates(self, node: Any) -> bool:
        """Whether the autograd node ``node`` was made before the window opened (the outputs
        of one forward all made before the first of their losses): the window could not note
        it, so another sighting is needed."""
        try:
            return type(node) is not tuple and node._sequence_nr() < self.opened_at
        except Exception:  # (a node without a sequence number: treated as noted-or-not)
            return False

    def where(self, node: Any) -> tuple[Any, str] | None:
        """``(location, how)`` for an output whose ``grad_fn`` is ``node`` (or, made without a
        graph, whose :func:`storage_key` is ``node``), noted in the window; ``how`` is ``"call"``
        or the module class built at the location."""
        for noted, where, how in reversed(self.noted):
            if noted is node or (type(node) is tuple and noted == node):
                return where, how
        return None

    def _wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def noting(*args: Any, **kwargs: Any) -> Any:
            out = original(*args, **kwargs)
            try:
                self._note(out)
            except Exception:  # a locating aid only: never in the way of the user's op
                pass
            return out
        functools.update_wrapper(noting, original)
        return noting

    def _note(self, output: Any) -> None:
        node = getattr(output, "grad_fn", None)
        if node is None:  # made under no_grad (a validation loss): known by its memory
            node = storage_key(output)
            if node is None or node in [n for n, _, _ in self.noted if type(n) is tuple]:
                return
        elif any(noted is node for noted, _, _ in self.noted):
            return
        frame = _past_dispatch(sys._getframe(2))
        start = frame
        for _ in range(_FRAMES_UP):
            if frame is None:
                break
            owner = frame.f_locals.get("self") if frame.f_code.co_name == "forward" else None
            if owner is not None:
                built = self.built(owner)
                if built is not None:
                    caller = _direct_caller(frame)
                    built_at = _used_once(caller, owner) if caller is not None else None
                    if built_at is not None:  # ``self.softmax = nn.Softmax(dim=1)``, called once
                        self.noted.append((node, built_at, type(owner).__name__))
                    elif caller is not None:  # ``p = self.sigmoid(logits)`` in the user's code
                        self.noted.append((node, frames.frame_location(caller), "call"))
                    else:  # inside a container's forward: the line that built the module
                        self.noted.append((node, built, type(owner).__name__))
                    self._stack(node, start)
                    return
            frame = frame.f_back
        where = frames.user_location(start)
        if where is not None:
            self.noted.append((node, where, "call"))
            self._stack(node, start)

    def _stack(self, node: Any, start: Any) -> None:
        if type(node) is tuple and len(self.stacks) < _KEPT:  # made without a graph
            self.stacks[node] = user_stack(start)


# cls -> {attr: count}: weakly keyed, so that a user's class (and through its methods the globals
# of its script: data, loaders, models) is not kept alive by the cache after the run drops it
_calls: "weakref.WeakKeyDictionary[type, dict[str, int]]" = weakref.WeakKeyDictionary()


def _calls_of(cls: type, attr: str) -> int:
    """How many ``self.<attr>(...)`` calls the methods of ``cls`` (and its first bases) make;
    cached per class while the class lives."""
    try:
        known = _calls.setdefault(cls, {})
    except TypeError:  # (a class that takes no weak reference: counted each time)
        known = {}
    if attr not in known:
        known[attr] = _count_calls(cls, attr)
    return known[attr]


def _count_calls(cls: type, attr: str) -> int:
    import ast

    count = 0
    for klass in cls.__mro__[:4]:
        for f in vars(klass).values():
            f = inspect.unwrap(f) if callable(f) else f  # (``@torch.no_grad()`` wraps it)
            node = function_node(f.__code__) if hasattr(f, "__code__") else None
            count += sum(1 for n in ast.walk(node) if isinstance(n, ast.Call) and
                         isinstance(n.func, ast.Attribute) and n.func.attr == attr and
                         isinstance(n.func.value, ast.Name) and n.func.value.id == "self") \
                if node is not None else 0
    return count


def _used_once(caller: Any, module: Any) -> Any:
    """Where ``module`` was built, when the user's method in ``caller`` calls it as
    ``self.<attr>(...)`` and its class calls that attribute nowhere else: an ``nn.Softmax``
    kept only to end ``forward`` is changed where it is built (``LogSoftmax``, or removed);
    one called in several places, or whose output the method reads more than once (fed to the
    next layer and returned), is needed and changed at the call. None otherwise."""
    if _output_read_again(caller):
        return None
    own = caller.f_locals.get("self")
    children = getattr(own, "_modules", None)
    if not isinstance(children, dict):
        return None
    attr = next((k for k, v in children.items() if v is module), None)
    if attr is None or _calls_of(type(own), attr) != 1:
        return None
    return assigned_in_init(type(own), attr)


def _output_read_again(caller: Any) -> bool:
    """Whether the statement running in ``caller`` binds its value to a name that the function
    reads twice or more before binding it again (``edge = self.sigmoid(x)``, then ``cat([f,
    edge])`` and ``return s, edge``): that output is needed by other code of the function."""
    import ast

    node = function_node(caller.f_code)
    line = caller.f_lineno
    if node is None or line is None:
        return False
    binds = [n for n in ast.walk(node) if isinstance(n, ast.Assign) and len(n.targets) == 1
             and isinstance(n.targets[0], ast.Name)]
    here = next((n for n in binds if n.lineno <= line <= (n.end_lineno or n.lineno)), None)
    if here is None:
        return False
    name, start = here.targets[0].id, here.end_lineno or here.lineno
    end = min((n.lineno for n in binds if n.targets[0].id == name and n.lineno > start),
              default=None)
    reads = [n for n in ast.walk(node) if isinstance(n, ast.Name) and n.id == name and
             isinstance(n.ctx, ast.Load) and n.lineno > start and (end is None or n.lineno <= end)]
    return len(reads) >= 2


def _direct_caller(forward: Any) -> Any:
    """The user's frame that called the module whose ``forward`` is ``forward`` (past
    ``Module.__call__``'s machinery and trainguard's own frames), or None when the module was
    called by library code (an ``nn.Sequential``): a direct call is the line to change."""
    frame = forward.f_back
    for _ in range(_FRAMES_UP):
        if frame is None:
            return None
        code = frame.f_code
        if frames.is_user_code(code):
            return frame
        if code.co_name not in _CALL_MACHINERY and not frames.is_trainguard_file(code.co_filename):
            return None
        frame = frame.f_back
    return None


def _past_dispatch(start: Any) -> Any:
    """The frame that called the op running in ``start``, past the dispatch of a
    ``TorchFunctionMode`` or tensor subclass (its handler calls the op again, a user's handler is
    user code too): the walk ends at the first user frame that is not such a handler."""
    frame, past = start, start
    for _ in range(2 * _FRAMES_UP):
        if frame is None:
            break
        if frame.f_code.co_name in _DISPATCH:
            past = frame.f_back
        elif frames.is_user_code(frame.f_code):
            break
        frame = frame.f_back
    return past if past is not None else start


def _sequence_now() -> int:
    """The next autograd sequence number of this thread (each node made takes the next one)."""
    import torch

    try:  # (opened inside ``torch.inference_mode()`` too: an evaluation's loss)
        with torch.inference_mode(False), torch.enable_grad():
            return torch.empty(0, requires_grad=True).view(0).grad_fn._sequence_nr()
    except Exception:  # (no sequence number to read: every node counts as made in the window)
        return -1


def storage_key(value: Any) -> tuple[str, int] | None:
    """A key for a tensor made without a graph: the address of its memory, which its views
    (``.view``, ``.reshape`` of a contiguous tensor, ``.flatten``) share; None for other values.
    Valid only while the window is open (one step): memory freed before is reused."""
    try:
        return ("storage", value.untyped_storage().data_ptr())
    except Exception:  # not a tensor, or a tensor without storage (meta, a subclass)
        return None


class Pending:
    """Findings about an operation's output, each held back for one window so that it is
    reported where the operation was made (the cause) rather than where the output was used.

    ``found(node, message, fix, used_at)``: the first sighting at a use opens the window
    (``Origin.start``), keeps the finding and calls ``hold`` (the cadence keeps the next steps
    checked); the next sighting at that use reports it at the line the window noted for its node
    (or, if not noted, at the use; a node made before the window opened, as the other heads of
    one forward are, waits for a later sighting). A sighting at another use first reports the held
    finding at its use. Each use is reported once. ``flush()`` (at exit) reports what is still
    held at its use and closes the window.
    """

    def __init__(self, origin: Origin, report: Callable[..., Any],
                 hold: Callable[[], None]) -> None:
        self.origin = origin
        self.report = report
        self.hold = hold
        self.held: tuple[str, str, Any] | None = None  # (message, fix, used at)
        self.reported: set[Any] = set()  # the uses reported

    def found(self, node: Any, message: str, fix: str, used_at: Any,
              used_stack: Any = None) -> None:
        """See the class doc. ``used_stack``, for an output made without a graph (a validation
        loss): the user's stack at the use; the finding goes to the op only when the function
        that computes the loss made it too, else to the use (a ``predict_proba`` or a dict's
        ``"probs"`` is right where it is made; using it as logits is the fault)."""
        if used_at in self.reported:
            return
        if self.held is not None and self.held[2] != used_at:
            self._emit(*self.held)
        if self.held is None:
            self.held = (message, fix, used_at)
            self.origin.start()
            self.hold()
            return
        made = self.origin.where(node) if node is not None else None
        if made is None and node is not None and self.origin.predates(node):
            return  # (a later output of the same forward: the next step's is noted)
        if made is None:
            self._emit(message, fix, used_at)
            return
        where, how = made
        built = f"the {how} built here" if how != "call" else "made here"
        stack = self.origin.stacks.get(node) if used_stack is not None else None
        line = cause_line(stack, used_stack) if stack else None
        if stack and (line is None or line[:2] != where[:2]):
            # made in another function (a model method, a helper returning a dict): which of
            # its outputs should have been used is decided at the use
            maker = f"the {how} built at" if how != "call" else "the call at"
            self._emit(f"{message} (made by {maker} {frames.short_location(where)})", fix,
                       used_at)
            return
        self._emit(f"{message} ({built}; used at {frames.short_location(used_at)})", fix, where,
                   used_at)

    def flush(self) -> None:
        if self.held is not None:
            self._emit(*self.held)
        self.origin.stop()

    def _emit(self, message: str, fix: str, where: Any, used_at: Any = None) -> None:
        self.reported.add(used_at if used_at is not None else where)
        self.held = None
        self.origin.stop()
        self.report(message, fix=fix, where=where)
