"""The io probe: ``torch.save`` (``on_save(obj, f)``) and ``torch.load`` (``on_load(f, kwargs)``),
wrapped when a check listens to them. Both events come before the call runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
    return undo
