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
from typing import Iterator

import torch

__all__ = ["active", "hidden"]

active = torch._C._len_torch_dispatch_stack  # (non-zero: a dispatch mode is on; one C call)
_INFRA = tuple(getattr(torch._C._TorchDispatchModeKey, k) for k in ("FAKE", "PROXY", "FUNCTIONAL"))


@contextmanager
def hidden() -> Iterator[None]:
    """Run the body with the user's dispatch modes popped (see the module's doc). Never raises of
    its own: where the modes cannot be popped, the body runs with them."""
    modes: list = []
    try:
        if not any(torch._C._get_dispatch_mode(k) is not None for k in _INFRA):
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
    for mode in reversed(modes):
        torch._C._push_on_torch_dispatch_stack(mode)
