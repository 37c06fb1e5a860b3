"""The sanitizer's own tensor operations, hidden from the user's dispatch modes.

A script may count or record the operations of a training step with a ``TorchDispatchMode`` (an
op counter, ``FlopCounterMode``, a memory tracker). The checks read values of the user's tensors
(``.item()``, ``isfinite().all()``, a norm), and while such a mode is active those reads would
reach it: the user's counts would change under ``trainguard run``. :func:`hidden` pops the
user's dispatch modes for the checks' work and pushes them back in their order.

Modes that torch itself sets up for tracing or compiling (fake tensors, proxies,
functionalization) are left in place, with every mode the user stacked on them: the checks then
run as they would without this module. Function modes (``TorchFunctionMode``) are left alone:
the sanitizer's own op tracers are function modes that a check enters at one event and leaves at
a later one (``core/modestack.py``), and torch's ``set_default_device`` is one too.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

__all__ = ["active", "hidden"]

_depth: Any = None  # torch's dispatch-mode stack depth, once torch is imported (lint never does)


def active() -> int:
    """How many user dispatch modes are on (non-zero: some are); one C call after the first."""
    global _depth
    if _depth is None:
        import torch

        _depth = torch._C._len_torch_dispatch_stack
    return _depth()


@contextmanager
def hidden() -> Iterator[None]:
    """Run the body with the user's dispatch modes popped (see the module's doc). Never raises of
    its own: where the modes cannot be popped, the body runs with them."""
    import torch

    modes: list = []
    try:
        keys = torch._C._TorchDispatchModeKey
        if all(torch._C._get_dispatch_mode(k) is None
               for k in (keys.FAKE, keys.PROXY, keys.FUNCTIONAL)):
            for _ in range(active()):
                modes.append(torch._C._pop_torch_dispatch_stack(None))
    except Exception:  # (a torch without these entry points: the checks' reads stay visible)
        _push(modes)
        modes = []
    try:
        yield
    finally:
        _push(modes)


def _push(modes: list) -> None:
    import torch

    for mode in reversed(modes):
        torch._C._push_on_torch_dispatch_stack(mode)
