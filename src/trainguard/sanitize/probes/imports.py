"""The imports probe: the import-time code of library modules (``on_library_import_pre(name)`` /
``on_library_import(name)``), followed when a check listens.

A module imported for the first time runs its top-level code once, inside
``importlib._bootstrap._load_unlocked(spec)``. Every import reaches that function through the
bootstrap module's globals (the ``import`` statement and ``importlib.import_module`` call
``_find_and_load``, which calls ``_find_and_load_unlocked``, which calls ``_load_unlocked``), so
replacing it there sees every first import, and only those: importing a module already in
``sys.modules`` never gets there (a lazy ``from sklearn.metrics import f1_score`` inside a function
costs nothing after its first call).

A module is a library's when it has no file (built-in, frozen, a namespace package) or its file is
not the user's (:func:`~trainguard.sanitize.core.frames.is_user_file`, the filter that picks the
line a finding points at: installed packages, the standard library, torch, trainguard). The events
mark each outermost stretch of library import-time code: ``on_library_import_pre`` when a library
module starts to run under import while no other library module's import is running, and
``on_library_import`` when it ends; the modules it imports in turn run inside the stretch. A user
module imported from there (a library importing the user's plugin at import) ends the stretch while
its own top-level code runs, and a new one starts when it returns, so that code counts as the
user's. A user module's import is no stretch at all: its top-level code is the user's code.

Only the process and the thread that installed the wrapper emit events (a DataLoader worker or a
background thread importing a module sends nothing). The wrapper passes the spec through and
returns the module, or raises what the import raised.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import TYPE_CHECKING, Any

from trainguard.sanitize.core.frames import is_user_file
from trainguard.sanitize.probes.patch import Undo

if TYPE_CHECKING:
    from trainguard.sanitize.core.bus import Bus

__all__ = ["attach"]

_EVENTS = ("on_library_import_pre", "on_library_import")


def attach(bus: "Bus") -> list[Undo]:
    """Wrap ``importlib._bootstrap._load_unlocked`` when a check listens to library imports;
    returns the undo actions."""
    undo: list[Undo] = []
    if any(bus.handlers[e] for e in _EVENTS):
        _install(bus, undo)
    return undo


def is_library_module(spec: Any) -> bool:
    """True when the module ``spec`` describes is not the user's: no file, or a file outside the
    user's code."""
    origin = spec.origin if getattr(spec, "has_location", False) else None
    return not isinstance(origin, str) or not origin or not is_user_file(origin)


def _install(bus: "Bus", undo: list[Undo]) -> None:
    bootstrap = sys.modules.get("_frozen_importlib")  # importlib._bootstrap
    original = getattr(bootstrap, "_load_unlocked", None)
    if original is None:  # an interpreter whose import system is laid out otherwise: no events
        return
    pid, thread = os.getpid(), threading.get_ident()
    stack: list[bool] = []  # per module being imported now in that thread: is it a library's

    def emit(event: str, name: str) -> None:
        if bus.handlers[event]:
            bus.emit(event, name)  # never raises: a failing check becomes TG002

    def load_unlocked(spec: Any) -> Any:
        if os.getpid() != pid or threading.get_ident() != thread:
            return original(spec)
        outer = bool(stack) and stack[-1]
        try:
            library = is_library_module(spec)
        except Exception as exc:  # (a spec of an odd loader: its code counts as the user's)
            bus.hook_failed("importlib's module loading", exc)
            library = False
        stack.append(library)
        if library != outer:
            emit(_EVENTS[0] if library else _EVENTS[1], spec.name)
        try:
            return original(spec)
        finally:
            stack.pop()
            if library != outer:
                emit(_EVENTS[1] if library else _EVENTS[0], spec.name)

    bootstrap._load_unlocked = load_unlocked
    undo.append(lambda: setattr(bootstrap, "_load_unlocked", original))
