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

from trainguard.sanitize.core.frames import Location
from trainguard.sanitize.core.records import BackwardCall, ForwardCall

__all__ = ["State", "GraphTrack", "Unreached"]

class _Token:
    __slots__ = ("track", "state", "__weakref__")

    def __init__(self, track: "GraphTrack", state: "State | None") -> None:
        self.track = track
        self.state = state

    def __call__(self, grad_outputs: Any) -> None:  # node pre-hook: observe, change nothing
        track = self.track
        if track.active:
            track.reached = True
            if self.state is not None and self.state.in_backward:
                track.accumulated = True
        return None


class GraphTrack:
    """The lifetime of one autograd graph, followed through its root node.

    Attributes:
        alive: the graph's root node still exists (someone still references the graph).
        reached: a backward has run through the root node.
        accumulated: a ``backward()`` (``torch.autograd.backward``, which accumulates into the
            leaves' ``.grad``) has run through it; ``torch.autograd.grad`` reaches a graph
            without it (it returns the gradients and leaves ``.grad`` alone).
        info: whatever the check that tracks it wants to remember (step, location, ...).
    """

    __slots__ = ("_token", "_handle", "reached", "accumulated", "active", "info")

    def __init__(self, node: Any, info: Any, state: "State | None" = None) -> None:
        token = _Token(self, state)
        self._token = weakref.ref(token)
        self._handle = node.register_prehook(token)
        self.reached = False
        self.accumulated = False
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
        grad_count: ``torch.autograd.grad`` calls completed outside a module's forward.
        root_forwards: outermost module calls completed.
        in_backward: a backward is running (forwards now are recomputation, e.g. checkpointing).
        in_step: an optimizer step is running (forwards now come from an LBFGS-style closure).
        modules: the modules whose calls are in progress and were watched (outermost calls, loss
            modules, the module types checks asked for), outermost first; inner modules of
            other types are not tracked (they keep PyTorch's fast path).
        stack: the :class:`ForwardCall` records in progress (outermost calls, loss modules and the
            module types checks asked for), outermost first.
        failed_module: the innermost module whose call raised, for explaining errors;
            ``failed_inputs`` the ``(where, shape, device)`` of its tensor arguments (also inside
            tuples, lists and dicts: ``"input 1[0]"``) and ``failed_root``
            the outermost module of that call.
        backwards: the last few backward calls, newest last.
        models: root modules seen, weakly held (``list(state.models)`` gives them).
        optimizers: optimizers seen stepping, weakly held.
        no_grad_depth: ``torch.no_grad()`` blocks open now.
        enable_grad_at: for each open ``torch.enable_grad()`` block, the user's line that opened it
            with grad mode off, or None (opened by a library, or by user code with grad on while
            no ``no_grad`` block is open), or False (opened by user code with grad already on
            inside a re-enabled region: a block of its own around a gradient, TG104).
    """

    def __init__(self) -> None:
        self.step = 0
        self.backward_count = 0
        self.grad_count = 0
        self.backwards_at_step = 0  # backward_count when the last optimizer step returned
        self.last_stepped = 0  # id() of the optimizer whose step returned last
        self.root_forwards = 0
        self.in_backward = 0
        self.in_step = 0
        self.modules: list[Any] = []
        self.stack: list[ForwardCall] = []
        self.failed_module: Any = None
        self.failed_inputs: list[tuple[str, tuple[int, ...], str]] = []
        self.failed_root: Any = None
        self.backwards: deque[BackwardCall] = deque(maxlen=8)
        self.models = _Seen()
        self.optimizers = _Seen()
        self._tracks: list[GraphTrack] = []
        # with stamps = "inputs" (probes/stamps.py), the latest outermost call whose output is a tuple, list or dict:
        # (order, id(module), class name, where, weak references to its tensor arguments, its
        # keyword arguments as Made.kwargs)
        self.last_multi: tuple | None = None
        # processes user code started through torch.multiprocessing (probes/children.py), not
        # watched: (count, start method, the user's line)
        self.children: list[tuple[int, str, Location | None]] = []
        self.loader_id = 0  # id() of the DataLoader whose __iter__ ran last (0: none seen)
        # the latest DataLoader passes (core/passes.py: LoaderPass, its batches and its end)
        self.loader_passes: deque[Any] = deque(maxlen=16)
        # DistributedSampler -> (the user's line of its latest set_epoch call, the calls so far)
        self.epoch_set: weakref.WeakKeyDictionary[Any, tuple[Location, int]] = \
            weakref.WeakKeyDictionary()
        # called with each LoaderPass when it ends (from a weakref callback: note, do not report)
        self.pass_listeners: list[Any] = []
        # a weak reference to the Made of each stamped outermost output made outside a backward,
        # settled steps included; TG201 reads and trims it
        self.stamps: list[Any] = []
        self.no_grad_depth = 0
        self.enable_grad_at: list[Location | None | bool] = []
        # the user's line of the latest ``set_grad_enabled(True)`` made inside an open no_grad
        # block with grad mode off (None once every no_grad block is closed)
        self.grad_on_at: Location | None = None
        # the user's line of the latest ``torch.set_grad_enabled(False)`` it called itself (a
        # global switch, or a ``with``/decorator form), until it calls ``set_grad_enabled(True)``
        self.grad_off_at: Location | None = None
        # the re-enabling lines (``reenabled_at``) under which ``torch.autograd.grad`` returned
        self.grads_taken_at: set[Location] = set()
        # classes of the outermost modules whose forward called ``torch.autograd.grad`` (forces
        # from an energy, a PINN's derivatives): they need grad mode, in evaluation too
        self.grads_in_forward: set[type] = set()
        self.functional_caller: Any = None  # during on_functional: the frame that called it
        # id(module) -> (weak reference, line): where user code last put that module in eval mode
        # (an outermost ``eval()``/``train(False)``), until it calls ``train()`` on it again
        self.eval_at: dict[int, tuple[Any, Location | None]] = {}

    def track_graph(self, tensor: Any, info: Any = None) -> GraphTrack | None:
        """Follow the graph behind ``tensor`` (None when it has no ``grad_fn``)."""
        node = getattr(tensor, "grad_fn", None)
        if node is None:
            return None
        track = GraphTrack(node, info, self)
        self._tracks.append(track)
        if len(self._tracks) > 4096:
            self._tracks = [t for t in self._tracks if t.alive]
        return track

    def reenabled_at(self) -> Location | None:
        """The user's line that turned grad back on inside a ``no_grad`` block: the innermost
        ``enable_grad()`` block open, else the latest ``set_grad_enabled(True)``; None when
        unknown."""
        opened = [w for w in self.enable_grad_at if w]
        return opened[-1] if opened else self.grad_on_at

    def grads_need_reenabling(self) -> bool:
        """Whether a gradient taken now needs the re-enabled region it runs in: False when user
        code opened an ``enable_grad()`` block of its own around it, inside that region (a
        helper's ``with torch.enable_grad():`` around ``autograd.grad``, for any caller)."""
        blocks = self.enable_grad_at
        last = max((i for i, w in enumerate(blocks) if w), default=-1)
        return not any(w is False for w in blocks[last + 1:])

    def last_backward_where(self) -> Location | None:
        """The user's line of the last backward call (a place in the script for findings made
        at a step or at exit), or None before any."""
        last = self.backwards[-1] if self.backwards else None
        return last.where if last is not None else None

    def release_all(self) -> None:
        """At the watcher's stop: drop the trackers and every reference to the user's objects
        (the module a failing call passed through, the frame a functional call came from), so
        that a watcher kept after its run (a trainer callback's) holds no model or data."""
        for track in self._tracks:
            track.release()
        self._tracks.clear()
        self.failed_module = self.failed_root = self.functional_caller = None
