"""The io probe: ``torch.save`` (``on_save(obj, f)``) and ``torch.load`` (``on_load(f, kwargs)``),
wrapped when a check listens to them; in a run of several ranks only, ``open()`` of a file path
for writing (``on_file_write(path)``: modes with ``w``, ``a``, ``x`` or ``+``). The events come
before the call runs."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from trainguard.sanitize.core import frames
from trainguard.sanitize.probes.patch import Undo, patch

if TYPE_CHECKING:
    from trainguard.sanitize.core.bus import Bus

__all__ = ["attach"]


def attach(bus: "Bus") -> list[Undo]:
    """Wrap ``torch.save``/``torch.load`` when a check listens; returns the undo actions."""
    import torch

    undo: list[Undo] = []
    if bus.handlers["on_save"]:
        def make_save(original: Any) -> Any:
            def save(*args: Any, **kwargs: Any) -> Any:
                bus.emit("on_save", *args[:2])  # never raises: a failing check becomes TG002
                return original(*args, **kwargs)
            return save
        patch(torch, "save", make_save, undo)
    if bus.handlers["on_load"]:
        def make_load(original: Any) -> Any:
            def load(f: Any, *args: Any, **kwargs: Any) -> Any:
                bus.emit("on_load", f, kwargs)  # never raises: a failing check becomes TG002
                return original(f, *args, **kwargs)
            return load
        patch(torch, "load", make_load, undo)
    if bus.handlers["on_file_write"] and bus.ranks is not None:
        import builtins
        import io

        def make_open(original: Any) -> Any:
            def open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
                if isinstance(file, (str, os.PathLike)) and isinstance(mode, str) and \
                        not _READ_ONLY.issuperset(mode) and \
                        frames.is_user_code(sys._getframe(1).f_code):  # (not a library's)
                    bus.emit("on_file_write", file)  # never raises
                return original(file, mode, *args, **kwargs)
            return open
        patch(builtins, "open", make_open, undo)
        patch(io, "open", make_open, undo)
    return undo


_READ_ONLY = frozenset("rbt")  # a mode made of these only reads
