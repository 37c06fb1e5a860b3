"""What the watcher knows about the run, shared by every check.

Events carry small records (:class:`ForwardCall`, :class:`LossCall`, :class:`BackwardCall`); the
:class:`State` keeps counters and the stack of module calls in progress. :class:`GraphTrack`
follows one autograd graph without keeping it alive: a no-op pre-hook on the graph's root node
holds a token, so the token dies with the node, and the hook marks the graph as reached when a
backward (``backward()`` or ``torch.autograd.grad``) runs through it.
"""

from __future__ import annotations

import weakref
from collections import deque
from typing import Any

from trainguard.sanitize.frames import Location, user_location

MADE = "trainguard.made"
"""Metadata key on the ``grad_fn`` of outermost module outputs (when ``State.stamp_outputs``); the
value is a :class:`Made`."""


class Made:
    """When and where an outermost output (or a backward root) was made.

    Stored in the output's ``grad_fn.metadata`` (which lives exactly as long as the node), so a
    weak reference to it tells whether the graph is still alive, and a walk over a graph finds
    where its parts came from.

    Attributes:
        backward_count: backward calls completed when it was made.
        step: optimizer steps completed.
        where: the user's ``(path, line, col)``.
        module: the module's class name (``"backward root"`` for a loss).
        order: outermost module calls completed (a clock for runs without optimizer steps).
        model_id: ``id()`` of the module whose call made it (None for a loss).
        inputs: weak references to the call's positional arguments, all tensors (when
            ``State.stamp_inputs``; else, or when an argument is not a tensor, None).
        output: a weak reference to the output tensor the stamp is on (when ``inputs`` is set
            and the output is one tensor; else None).
        kwargs: with ``inputs``, the call's keyword arguments (tensors as weak references), or
            None when it had none.
    """

    __slots__ = ("backward_count", "step", "where", "module", "order", "model_id", "inputs",
                 "output", "kwargs", "__weakref__")

    def __init__(self, backward_count: int, step: int, where: Any, module: str,
                 order: int, model_id: int | None = None, inputs: list[Any] | None = None,
                 output: Any = None, kwargs: dict[str, Any] | None = None) -> None:
        self.backward_count = backward_count
        self.step = step
        self.where = where
        self.module = module
        self.order = order
        self.model_id = model_id
        self.inputs = inputs
        self.output = output
        self.kwargs = kwargs

__all__ = ["MADE", "Made", "State", "ForwardCall", "LossCall", "BackwardCall", "GraphTrack", "Unreached",
           "first_tensor"]


_NO_KWARGS: dict = {}


class ForwardCall:
    """One module call. ``output`` is set when it returns; ``failed`` when it raised.

    ``where`` (the user's line) and ``direct`` are set for outermost calls only.
    """

    __slots__ = ("module", "args", "kwargs", "output", "depth", "training", "grad_enabled",
                 "where", "direct", "reenabled", "failed", "made", "__weakref__")

    def __init__(self, module: Any, args: tuple, depth: int, training: bool,
                 grad_enabled: bool, where: Location | None) -> None:
        self.module = module
        self.args = args
        self.kwargs: dict = _NO_KWARGS  # keyword arguments (outermost calls checked in full)
        self.output: Any = None
        self.depth = depth
        self.training = training
        self.grad_enabled = grad_enabled
        self.where = where
        self.direct = False  # an outermost call made by user code itself (not by a library)
        self.reenabled = False  # grad on inside an open torch.no_grad() block (outermost calls)
        self.failed = False
        self.made: Made | None = None  # the stamp put on its outputs, when stamping is on


class LossCall:
    """A loss computed by a loss module or a watched functional loss.

    Attributes:
        name: ``"CrossEntropyLoss"`` (module) or ``"cross_entropy"`` (functional).
        input, target: the first two arguments as passed.
        output: the loss (None when it raised).
        module: the loss module, or None for a functional loss.
        where: the user's line computing it.
    """

    __slots__ = ("name", "input", "target", "output", "module", "_where", "_frame", "args", "kwargs")

    def __init__(self, name: str, args: tuple, kwargs: dict, output: Any, module: Any,
                 where: Location | None, frame: Any = None) -> None:
        self.name = name
        self.args = args
        self.kwargs = kwargs
        self.input = args[0] if args else kwargs.get("input")
        self.target = args[1] if len(args) > 1 else kwargs.get("target")
        self.output = output
        self.module = module
        self._where = where
        self._frame = frame  # only during the event: ``where`` is found from it on first use

    @property
    def where(self) -> Location | None:
        if self._where is None and self._frame is not None:
            self._where = user_location(self._frame)
            self._frame = None
        return self._where


class BackwardCall:
    """A ``backward``: ``tensors`` are the roots, ``retain_graph`` as PyTorch resolves it.

    ``index`` is the number of backward calls completed before this one, ``step`` the optimizer
    steps completed; ``failed`` is set when it raised. ``tensors`` is emptied after the events, so
    the record keeps no graph alive; ``facts`` holds what checks noted about the roots.
    """

    __slots__ = ("tensors", "retain_graph", "create_graph", "where", "index", "step", "failed",
                 "facts")

    def __init__(self, tensors: tuple, retain_graph: bool, create_graph: bool,
                 where: Location | None, index: int, step: int) -> None:
        self.tensors = tensors
        self.retain_graph = retain_graph
        self.create_graph = create_graph
        self.where = where
        self.index = index
        self.step = step
        self.failed = False
        self.facts: dict[str, Any] = {}


class _Token:
    __slots__ = ("track", "__weakref__")

    def __init__(self, track: "GraphTrack") -> None:
        self.track = track

    def __call__(self, grad_outputs: Any) -> None:  # node pre-hook: observe, change nothing
        track = self.track
        if track.active:
            track.reached = True
        return None


class GraphTrack:
    """The lifetime of one autograd graph, followed through its root node.

    Attributes:
        alive: the graph's root node still exists (someone still references the graph).
        reached: a backward has run through the root node.
        info: whatever the check that tracks it wants to remember (step, location, ...).
    """

    __slots__ = ("_token", "_handle", "reached", "active", "info")

    def __init__(self, node: Any, info: Any) -> None:
        token = _Token(self)
        self._token = weakref.ref(token)
        self._handle = node.register_prehook(token)
        self.reached = False
        self.active = True
        self.info = info

    @property
    def alive(self) -> bool:
        return self._token() is not None

    def release(self) -> None:
        """Remove the hook (if the node still exists) and stop observing."""
        self.active = False
        if self.alive:
            try:
                self._handle.remove()
            except Exception:  # the node went away between the two calls
                pass


class Unreached:
    """Graphs followed until a backward reaches them or they die unreached.

    ``add(tensor, key)`` follows one output; ``resolve(final=False)`` returns the keys all of
    whose graphs died (or, with ``final``, are still alive) without any backward reaching any of
    them, and forgets every settled key. Keys are hashable descriptions (line, model name, ...).
    ``resolve(reached=some_list)`` also appends the keys a backward reached to that list.
    """

    def __init__(self, state: "State", *, limit: int = 256) -> None:
        self.state = state
        self.limit = limit
        self.tracks: list[GraphTrack] = []

    def __bool__(self) -> bool:
        return bool(self.tracks)

    def add(self, tensor: Any, key: Any) -> None:
        track = self.state.track_graph(tensor, info=key)
        if track is not None:
            self.tracks.append(track)
        if len(self.tracks) > self.limit:
            for t in self.tracks[:-self.limit]:
                t.release()
            del self.tracks[:-self.limit]

    def resolve(self, *, final: bool = False, reached: list[Any] | None = None) -> list[Any]:
        groups: dict[Any, list[GraphTrack]] = {}
        for track in self.tracks:
            groups.setdefault(track.info, []).append(track)
        keep: list[GraphTrack] = []
        unreached: list[Any] = []
        for key, tracks in groups.items():
            if any(t.reached for t in tracks):
                settled = True
                if reached is not None:
                    reached.append(key)
            elif final or not any(t.alive for t in tracks):
                settled = True
                unreached.append(key)
            else:
                settled = False
            if settled:
                for t in tracks:
                    t.release()
            else:
                keep.extend(tracks)
        self.tracks = keep
        return unreached


def first_tensor(value: Any, *, limit: int = 4) -> list[Any]:
    """Up to ``limit`` tensors found in a module output (a tensor, tuple, list or dict)."""
    import torch

    out: list[Any] = []
    stack = [value]
    while stack and len(out) < limit:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            out.append(item)
        elif isinstance(item, (tuple, list)):
            stack.extend(reversed(item))
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
    return out


class _Seen:
    """A weak set that is cheap to add to on every call (keyed by ``id``)."""

    def __init__(self) -> None:
        self._refs: dict[int, Any] = {}

    def add(self, module: Any) -> None:
        if id(module) not in self._refs:
            key = id(module)
            self._refs[key] = weakref.ref(module, lambda _, key=key: self._refs.pop(key, None))

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter([m for m in (r() for r in list(self._refs.values())) if m is not None])

    def __len__(self) -> int:
        return len(self._refs)


class State:
    """Counters and in-progress calls, updated by the watcher before checks see an event.

    Attributes:
        step: optimizer steps completed (all optimizers).
        backward_count: backward calls completed.
        root_forwards: outermost module calls completed.
        in_backward: a backward is running (forwards now are recomputation, e.g. checkpointing).
        in_step: an optimizer step is running (forwards now come from an LBFGS-style closure).
        modules: the modules whose calls are in progress and were watched (outermost calls, loss
            modules, the module types checks asked for), outermost first; inner modules of
            other types are not tracked (they keep PyTorch's fast path).
        stack: the :class:`ForwardCall` records in progress (outermost calls, loss modules and the
            module types checks asked for), outermost first.
        failed_module: the innermost module whose call raised, for explaining errors;
            ``failed_inputs`` the ``(shape, device)`` of its tensor arguments and ``failed_root``
            the outermost module of that call.
        backwards: the last few backward calls, newest last.
        models: root modules seen, weakly held (``list(state.models)`` gives them).
        optimizers: optimizers seen stepping, weakly held.
        no_grad_depth: ``torch.no_grad()`` blocks open now.
        enable_grad_at: for each open ``torch.enable_grad()`` block, the user's line that opened it
            with grad mode off, or None (opened by a library, or with grad already on).
    """

    def __init__(self) -> None:
        self.step = 0
        self.backward_count = 0
        self.backwards_at_step = 0  # backward_count when the last optimizer step returned
        self.last_stepped = 0  # id() of the optimizer whose step returned last
        self.root_forwards = 0
        self.in_backward = 0
        self.in_step = 0
        self.modules: list[Any] = []
        self.stack: list[ForwardCall] = []
        self.failed_module: Any = None
        self.failed_inputs: list[tuple[tuple[int, ...], str]] = []
        self.failed_root: Any = None
        self.backwards: deque[BackwardCall] = deque(maxlen=8)
        self.models = _Seen()
        self.optimizers = _Seen()
        self._tracks: list[GraphTrack] = []
        self.stamp_outputs = False  # a check asked for MADE stamps on outermost outputs
        self.stamp_inputs = False  # ... holding weak references to the call's tensor arguments
        # with stamp_inputs, the latest outermost call whose output is a tuple, list or dict:
        # (order, id(module), class name, where, weak references to its tensor arguments, its
        # keyword arguments as Made.kwargs)
        self.last_multi: tuple | None = None
        self.loader_id = 0  # id() of the DataLoader whose __iter__ ran last (0: none seen)
        # the latest DataLoader passes: (pass number, weak reference to the iterator its __iter__
        # returned, len(loader) or None, whether that DataLoader had a pass before); the
        # iterator's ``_num_yielded`` counts its batches
        self.loader_passes: deque[tuple[int, Any, int | None, bool]] = deque(maxlen=16)
        # a weak reference to the Made of each stamped outermost output made outside a backward,
        # settled steps included; TG201 reads and trims it
        self.stamps: list[Any] = []
        self.no_grad_depth = 0
        self.enable_grad_at: list[Location | None] = []
        self.functional_caller: Any = None  # during on_functional: the frame that called it
        # id(module) -> (weak reference, line): where user code last put that module in eval mode
        # (an outermost ``eval()``/``train(False)``), until it calls ``train()`` on it again
        self.eval_at: dict[int, tuple[Any, Location | None]] = {}
        # (weak reference, line, backward calls so far, whether a library's eval() had put it in
        # eval mode): the last ``train()`` user code called on a module that was in eval mode
        self.train_at: tuple[Any, Location, int, bool] | None = None
        self.library_eval: Any = None  # weak reference to the module a library last put in eval
        # id(parameter) -> (weak reference, line): where user code added it to a module already
        # built (outside the module's ``__init__``)
        self.added_at: dict[int, tuple[Any, Location]] = {}

    def track_graph(self, tensor: Any, info: Any = None) -> GraphTrack | None:
        """Follow the graph behind ``tensor`` (None when it has no ``grad_fn``)."""
        node = getattr(tensor, "grad_fn", None)
        if node is None:
            return None
        track = GraphTrack(node, info)
        self._tracks.append(track)
        if len(self._tracks) > 4096:
            self._tracks = [t for t in self._tracks if t.alive]
        return track

    def release_all(self) -> None:
        for track in self._tracks:
            track.release()
        self._tracks.clear()
