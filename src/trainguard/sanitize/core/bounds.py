"""The bounds on the sanitizer's own work: every walk a check makes has a limit, and a clock.

Each kind of walk has one bound, named here so that the checks and their docs give one number:

- an autograd graph: at most :data:`GRAPH_NODES` nodes per walk
  (:func:`~trainguard.sanitize.core.holders.graph_nodes`); a check that searches several graphs at once
  shares one :class:`Budget` of that size between them;
- the stack: at most :data:`FRAMES` user frames per search
  (:func:`~trainguard.sanitize.core.frames.user_frames`); a walk up to the nearest user frame is bounded
  by the stack's own depth (the ``f_back`` chain ends);
- user variables and what they hold: at most :data:`CONTAINER_ITEMS` values per search, of each
  list, tuple, deque or dict the newest :data:`CONTAINER_NEWEST` items and older ones at doubling
  distances from the end (about 40 more for a million items), :data:`CONTAINER_DEPTH` levels deep
  (:func:`~trainguard.sanitize.core.holders.find_holder`);
- a dataset's objects (the generators its transforms hold, TG503): at most
  :data:`DATASET_NODES` objects, :data:`DATASET_DEPTH` attribute or item steps below the dataset,
  the first :data:`DATASET_ITEMS` items of each list, tuple or dict
  (:func:`~trainguard.sanitize.core.rng_holders.held_rngs`);
- source files: a file longer than :data:`SOURCE_CHARS` characters is not parsed; parsed trees are
  cached (:func:`parse_file`);
- the heap (``gc.get_objects()``, on rare paths only): at most :data:`HEAP_OBJECTS` objects looked
  at (:func:`live_objects`).

When a bound is hit, the walk stops and the check goes on with what it found (or reports nothing);
it never searches on.

The clock: the watcher's watchdog (``watcher.py``) gives every check's event a deadline, the time at
which the checks' share of the run's wall time would pass 50% (at exit: 2 s for all the exit work
together). The walks above read it every few hundred steps (:func:`check_deadline`); past it they
raise :class:`Overrun`, which the watcher turns into one TG002 naming the check and its time, and
that check is switched off; the user's run goes on.
"""

from __future__ import annotations

import ast
import linecache
import time
from typing import Any, Callable, Iterator

__all__ = ["GRAPH_NODES", "FRAMES", "CONTAINER_ITEMS", "CONTAINER_NEWEST", "CONTAINER_DEPTH",
           "DATASET_DEPTH", "DATASET_ITEMS", "DATASET_NODES", "SOURCE_CHARS", "HEAP_OBJECTS",
           "Budget", "Overrun", "check_deadline", "clock", "parse_file", "live_objects"]

GRAPH_NODES = 20_000  # autograd nodes per walk (a 10^5-node graph is walked in part)
FRAMES = 32  # user frames per search of the stack
CONTAINER_ITEMS = 4_096  # values looked at per search of user variables
CONTAINER_NEWEST = 16  # newest items of one list/tuple/dict/set looked at (then older ones, spread)
CONTAINER_DEPTH = 6  # containers and object attributes followed inside one variable
DATASET_DEPTH = 4  # attribute/item steps below a dataset walked for the generators it holds
DATASET_ITEMS = 16  # items of one list/tuple/dict below a dataset looked at
DATASET_NODES = 256  # objects below a dataset visited (a million file names cost the first few)
SOURCE_CHARS = 2_000_000  # longer source files are not parsed (about 50,000 lines)
HEAP_OBJECTS = 5_000_000  # objects of gc.get_objects() looked at per scan
_EVERY = 256  # steps of a walk between two readings of the clock


class Overrun(BaseException):
    """A check's work ran past its deadline (raised inside a walk, caught by the watcher).

    A ``BaseException``: the helpers that swallow any ``Exception`` from a diagnosis (and carry on
    with a partial answer) must not swallow this one, so the check stops where it is.
    """


class _Clock:
    """The event the watcher is sending now: when it started (``perf_counter()``, None between
    events and on settled steps) and the watchdog that knows its deadline."""

    __slots__ = ("start", "start_cpu", "dog")

    def __init__(self) -> None:
        self.start: float | None = None
        self.start_cpu: float | None = 0.0  # thread_time() when it started (None: not read)
        self.dog: Any = None  # a Watchdog, with deadline(start) -> perf_counter() time


clock = _Clock()


def check_deadline() -> None:
    """Raise :class:`Overrun` when the event running now is past its deadline."""
    start = clock.start
    if start is not None and time.perf_counter() > clock.dog.deadline(start):
        if clock.start_cpu is None:  # (an event begun before the CPU clock was read per event:
            clock.start_cpu = time.thread_time()  # its CPU time counts from here)
        if clock.dog.cpu_past(clock.start_cpu):
            raise Overrun()


class Budget:
    """A count of steps a search may still take (nodes, values), shared by the walks of one search.

    ``take()`` spends one step and says whether it was available; every :data:`_EVERY` steps it
    also reads the clock (:func:`check_deadline`). ``spent`` tells whether the search was cut short.
    """

    __slots__ = ("left", "spent")

    def __init__(self, limit: int) -> None:
        self.left = limit
        self.spent = False

    def take(self) -> bool:
        left = self.left
        if left <= 0:
            self.spent = True
            return False
        self.left = left - 1
        if not left % _EVERY:
            check_deadline()
        return True


_trees: dict[str, tuple[int, ast.Module | None]] = {}  # path -> (source length, tree)
_TREES = 16  # parsed files kept


def parse_file(path: str) -> ast.Module | None:
    """The parsed source of ``path`` as ``linecache`` has it (so notebook cells and ``python -c``
    code without a file answer None), or None when it is empty, longer than
    :data:`SOURCE_CHARS` characters or not valid Python. Cached per file while its length is
    unchanged (the newest :data:`_TREES` files)."""
    lines = linecache.getlines(path)
    size = sum(map(len, lines))
    known = _trees.get(path)
    if known is not None and known[0] == size:
        return known[1]
    tree = None
    if 0 < size <= SOURCE_CHARS:
        try:
            tree = ast.parse("".join(lines), filename=path)
        except (SyntaxError, ValueError):
            tree = None
    if len(_trees) >= _TREES:
        _trees.pop(next(iter(_trees)))
    _trees[path] = (size, tree)
    return tree


def live_objects(test: Callable[[Any], bool], *, limit: int = HEAP_OBJECTS) -> Iterator[Any]:
    """The objects of ``gc.get_objects()`` for which ``test`` is true, looking at ``limit`` at most
    (and reading the clock as it goes). For rare paths only: the list alone costs about 10 ms per
    million objects."""
    import gc

    for i, obj in enumerate(gc.get_objects()):
        if i >= limit:
            return
        if not i % 4096:
            check_deadline()
        if test(obj):
            yield obj
