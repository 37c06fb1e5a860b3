"""The repro probe: seeding calls, determinism switches and ``fork_rng`` blocks (TG501-TG503).

- the calls that seed or restore a global random generator (``random.seed``/``setstate``,
  ``numpy.random.seed``/``set_state``, ``torch.manual_seed``/``seed``/``set_rng_state``,
  ``torch.cuda.manual_seed``/``manual_seed_all``) and the determinism switches
  (``torch.use_deterministic_algorithms``, ``torch.set_deterministic_debug_mode``, assignments to
  ``torch.backends.cudnn.benchmark``/``deterministic``) become ``on_repro_pre``/``on_repro``
  events. Scripts call these a handful of times, so the wrappers cost nothing measurable; the
  functions that draw random numbers are never wrapped.
- ``torch.random.fork_rng`` counts the open blocks that fork torch's generators: a torch seeding
  call made inside one (``with torch.random.fork_rng(): torch.manual_seed(1234); X_val = ...``)
  is no event, since the block restores torch's state on exit; it neither seeds the run nor asks
  for a reproducible one. Seeds of ``random`` and numpy inside the block (not restored) stay events.
- ``numpy.random.default_rng`` called by the user's code without a seed (``default_rng()``,
  ``default_rng(None)``: a generator seeded from the OS) becomes an ``on_repro`` event
  ``"numpy.random.default_rng"`` whose value is the generator it made; a seeded call is no event.

Calls made by torch itself (``torch.random.fork_rng`` restoring a state, ``torch.manual_seed``
seeding the CUDA generators, a DataLoader worker seeding itself) are not events, and nothing is
emitted in another process than the one that installed the wrappers (forked DataLoader workers
inherit them). A wrapper passes its arguments through unchanged and returns what the original
returns.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from types import FrameType
from typing import TYPE_CHECKING, Any

from trainguard.sanitize.core.frames import is_user_code
from trainguard.sanitize.core.seeding import fork_depth as _fork_depth
from trainguard.sanitize.probes.patch import Undo

if TYPE_CHECKING:
    from trainguard.sanitize.core.bus import Bus

__all__ = ["attach"]


# (owner module, attribute, event name, keyword that carries the value)
_TORCH_CALLS = (
    ("torch", "manual_seed", "torch.manual_seed", "seed"),
    ("torch.random", "manual_seed", "torch.manual_seed", "seed"),
    ("torch", "seed", "torch.seed", None),
    ("torch.random", "seed", "torch.seed", None),
    ("torch", "set_rng_state", "torch.set_rng_state", "new_state"),
    ("torch.random", "set_rng_state", "torch.set_rng_state", "new_state"),
    ("torch.cuda", "manual_seed", "torch.cuda.manual_seed", "seed"),
    ("torch.cuda", "manual_seed_all", "torch.cuda.manual_seed_all", "seed"),
    ("torch", "use_deterministic_algorithms", "torch.use_deterministic_algorithms", "mode"),
    ("torch", "set_deterministic_debug_mode", "torch.set_deterministic_debug_mode", "debug_mode"),
)
_OTHER_CALLS = (
    ("random", "seed", "random.seed", "a"),
    ("random", "setstate", "random.setstate", "state"),
    ("numpy.random", "seed", "numpy.random.seed", "seed"),
    ("numpy.random", "set_state", "numpy.random.set_state", "state"),
)
_CUDNN_FLAGS = ("benchmark", "deterministic")
# the seeding calls whose effect ``torch.random.fork_rng`` undoes when its block ends
_FORKED = {"torch.manual_seed", "torch.seed", "torch.set_rng_state", "torch.cuda.manual_seed",
           "torch.cuda.manual_seed_all"}
# Modules of torch's pass-through wrappers: ``import torch._dynamo`` (torchvision and
# ``torch.compile`` import it) replaces ``torch.manual_seed`` by ``torch._disable_dynamo(...)``
# when it is the same object as ``torch.random.manual_seed`` (torch/_dynamo/__init__.py), so a
# user's seed call then reaches the wrapper through these frames: they are looked past.
_PASS_THROUGH = ("torch._compile", "torch._dynamo.eval_frame")
_PASS_THROUGH_FRAMES = 4  # at most this many of them above the wrapper


def _from_torch(frame: FrameType | None) -> bool:
    """True when the calling frame is torch's own code (past torch's pass-through wrappers)."""
    for _ in range(_PASS_THROUGH_FRAMES):
        if frame is None or frame.f_globals.get("__name__", "") not in _PASS_THROUGH:
            break
        frame = frame.f_back
    name = frame.f_globals.get("__name__", "") if frame is not None else ""
    return name == "torch" or name.startswith("torch.")


def attach(bus: "Bus") -> list[Undo]:
    """Wrap the seeding calls and determinism switches when a check listens to them; returns the
    undo actions."""
    undo: list[Undo] = []
    if bus.handlers["on_repro_pre"] or bus.handlers["on_repro"]:
        _install(bus, undo)
    return undo


def _install(w: "Bus", undo: list[Undo]) -> None:
    """Wrap the seeding calls and determinism switches (see the module docstring)."""
    import importlib

    import torch

    is_compiling = torch.compiler.is_compiling
    pid = os.getpid()

    def emit(event: str, name: str, value: Any) -> None:
        if w.handlers[event]:
            w.emit(event, name, value)

    def observed(original: Any, name: str, key: str | None, depth: int) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            if (is_compiling() or os.getpid() != pid or (_fork_depth[0] and name in _FORKED)
                    or _from_torch(sys._getframe(depth))):
                return original(*args, **kwargs)
            value = args[0] if args else kwargs.get(key) if key else None
            emit("on_repro_pre", name, value)
            result = original(*args, **kwargs)
            emit("on_repro", name, value)
            return result
        functools.update_wrapper(call, original)
        return call

    wrapped: dict[int, Any] = {}  # one wrapper per original, shared by its aliases
    for module_name, attr, name, key in (*_TORCH_CALLS, *_OTHER_CALLS):
        try:
            owner = importlib.import_module(module_name)  # numpy: torch has imported it already
        except ImportError:
            owner = None
        original = getattr(owner, attr, None) if owner is not None else None
        if original is None:
            continue
        wrapper = wrapped.get(id(original))
        if wrapper is None:
            wrapper = wrapped[id(original)] = observed(original, name, key, 1)
        setattr(owner, attr, wrapper)
        undo.append(lambda owner=owner, attr=attr, original=original:
                    setattr(owner, attr, original))

    _wrap_fork_rng(torch, undo)
    _wrap_default_rng(emit, pid, undo)

    # ``torch.backends.cudnn.benchmark = True`` goes through a ``ContextProp`` descriptor on the
    # module's class, which calls its ``setter``: wrap that (two frames below the user's line).
    cudnn_type = type(torch.backends.cudnn)
    for flag in _CUDNN_FLAGS:
        prop = cudnn_type.__dict__.get(flag)
        if prop is None or not hasattr(prop, "setter"):
            continue
        original_setter = prop.setter
        prop.setter = observed(original_setter, f"cudnn.{flag}", None, 2)
        undo.append(lambda prop=prop, original=original_setter:
                    setattr(prop, "setter", original))


def _wrap_default_rng(emit: Any, pid: int, undo: list[Undo]) -> None:
    """Make ``numpy.random.default_rng`` emit the generator it made from the OS (no seed given)
    when the user's code called it."""
    numpy_random = sys.modules.get("numpy.random")
    original = getattr(numpy_random, "default_rng", None)
    if original is None:
        return

    def default_rng(*args: Any, **kwargs: Any) -> Any:
        made = original(*args, **kwargs)
        seed = args[0] if args else kwargs.get("seed")
        caller = sys._getframe(1)
        if seed is None and os.getpid() == pid and is_user_code(caller.f_code):
            emit("on_repro", "numpy.random.default_rng", made)
        return made

    functools.update_wrapper(default_rng, original)
    numpy_random.default_rng = default_rng
    undo.append(lambda: setattr(numpy_random, "default_rng", original))


def _wrap_fork_rng(torch: Any, undo: list[Undo]) -> None:
    """Wrap ``torch.random.fork_rng`` (and ``torch.fork_rng`` where that alias exists) to count
    its open blocks. ``enabled=False`` and ``device_type="meta"`` fork nothing: not counted."""
    original = torch.random.fork_rng

    @contextlib.contextmanager
    def counted(*args: Any, **kwargs: Any) -> Any:
        enabled = kwargs.get("enabled", args[1] if len(args) > 1 else True)
        device_type = kwargs.get("device_type", args[5] if len(args) > 5 else None)
        forks = bool(enabled) and device_type != "meta"
        with original(*args, **kwargs):
            _fork_depth[0] += forks
            try:
                yield
            finally:
                _fork_depth[0] -= forks

    fork_rng = functools.update_wrapper(counted, original)
    for owner in (torch.random, torch):
        if getattr(owner, "fork_rng", None) is original:
            owner.fork_rng = fork_rng
            undo.append(lambda owner=owner: setattr(owner, "fork_rng", original))
