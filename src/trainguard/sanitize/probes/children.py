"""The child-process probe: processes the user's code starts through ``torch.multiprocessing``.

The checks watch the process they run in. Training in child processes (Hogwild with
``mp.Process(target=train, args=(model,))``, ranks started with ``mp.spawn`` or
``mp.start_processes``) is not watched: their findings are never reported. So that a clean report
does not read as "the children were checked", this probe counts the children that user code starts
(``State.children``: ``(count, start method, the user's line)``) and the run's summary and JSON
report say they were not watched. Processes started by libraries (DataLoader workers) do not count.
Installed always; costs one frame look-up per process started.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from trainguard.sanitize.core import frames
from trainguard.sanitize.probes.patch import Undo, patch

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
    inside = [0]  # in a spawn/start_processes call: its own Process.start calls are not counted

    def note(count: int, method: str, caller: Any) -> None:
        try:
            if frames.is_user_code(caller.f_code):
                state.children.append((count, method, frames.frame_location(caller)))
        except Exception as exc:  # a report aid only: never in the way of the user's processes
            bus.hook_failed("torch.multiprocessing", exc)

    def make_many(default: str) -> Any:
        def make(original: Any) -> Any:
            def start(fn: Any, args: tuple = (), nprocs: int = 1, *rest: Any, **kwargs: Any) -> Any:
                method = kwargs.get("start_method", rest[3] if len(rest) > 3 else default)
                note(nprocs, str(method), sys._getframe(1))
                inside[0] += 1
                try:
                    return original(fn, args, nprocs, *rest, **kwargs)
                finally:
                    inside[0] -= 1
            return start
        return make

    patch(mp, "start_processes", make_many("spawn"), undo)
    patch(mp, "spawn", make_many("spawn"), undo)

    def make_start(original: Any) -> Any:
        def start(self: Any) -> None:
            if not inside[0]:
                method = (getattr(self, "_start_method", None)
                          or multiprocessing.get_start_method(allow_none=True) or "default")
                note(1, method, sys._getframe(1))
            return original(self)
        return start

    patch(multiprocessing.process.BaseProcess, "start", make_start, undo)
    return undo
