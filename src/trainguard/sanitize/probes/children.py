"""The child-process probe: processes the user's code starts through ``torch.multiprocessing``.

The checks watch the process they run in. So that training in child processes (ranks started with
``mp.spawn`` or ``mp.start_processes``, Hogwild with ``mp.Process(target=train, args=(model,))``)
is watched too, this probe wraps the function each child runs in ``ranks.children.Child``: the
child runs it under a watcher of its own and sends its findings back to the parent's report
(``ranks/children.py``). A child whose function cannot be wrapped (a ``Process`` subclass with its
own ``run()``) is counted instead (``State.children``: ``(count, start method, the user's line)``)
and the run's summary and JSON report say it was not watched. Processes started by libraries
(DataLoader workers) are neither wrapped nor counted. Installed always; costs one frame look-up
per process started.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from trainguard.sanitize.core import frames
from trainguard.sanitize.probes.patch import Undo, patch
from trainguard.sanitize.ranks.children import Child, Family, attached

if TYPE_CHECKING:
    from trainguard.sanitize.core.bus import Bus

__all__ = ["attach"]


def attach(bus: "Bus") -> list[Undo]:
    """Wrap ``torch.multiprocessing.spawn``/``start_processes`` and ``Process.start``; returns the
    undo actions."""
    import multiprocessing
    import multiprocessing.process

    import torch.multiprocessing as mp

    undo: list[Undo] = []
    state = bus.state
    family = bus.family = Family(bus)
    inside = [0]  # in a spawn/start_processes call: its own Process.start calls are not counted

    def user_line(caller: Any) -> Any:
        try:
            return frames.frame_location(caller) if frames.is_user_code(caller.f_code) else None
        except Exception as exc:  # a report aid only: never in the way of the user's processes
            bus.hook_failed("torch.multiprocessing", exc)
            return None

    def make_many(what: str) -> Any:
        def make(original: Any) -> Any:
            def start(fn: Any, args: tuple = (), nprocs: int = 1, *rest: Any, **kwargs: Any) -> Any:
                where = user_line(sys._getframe(1)) if not inside[0] else None
                if where is not None:
                    fn = Child(fn, family.spawn_job(what, int(nprocs), where), None)
                inside[0] += 1
                try:
                    context = original(fn, args, nprocs, *rest, **kwargs)
                finally:
                    inside[0] -= 1
                if where is not None and context is not None:  # join=False: the processes
                    family.jobs[-1].processes.update(enumerate(getattr(context, "processes", [])))
                return context
            return start
        return make

    patch(mp, "start_processes", make_many("mp.start_processes"), undo)
    patch(mp, "spawn", make_many("mp.spawn"), undo)

    def make_start(original: Any) -> Any:
        def start(self: Any) -> None:
            where = user_line(sys._getframe(1)) if not inside[0] else None
            if where is not None:
                if type(self).run is multiprocessing.process.BaseProcess.run and self._target:
                    setup, index = family.process_child(self, where)
                    self._target = Child(self._target, setup, index)
                else:  # its own run(): nothing to wrap
                    method = (getattr(self, "_start_method", None)
                              or multiprocessing.get_start_method(allow_none=True) or "default")
                    state.children.append((1, method, where))
            return original(self)
        return start

    patch(multiprocessing.process.BaseProcess, "start", make_start, undo)
    attached.append(bus)
    undo.append(lambda: attached.remove(bus) if bus in attached else None)
    return undo
