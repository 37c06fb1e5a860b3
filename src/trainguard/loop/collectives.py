"""The loop's own collectives, and the tensors and works they keep alive until the process ends.

Every rank calls them at the same point of the loop (after the same optimizer step).
"""

from __future__ import annotations

import atexit
from typing import Any

import torch
import torch.distributed as dist

__all__ = ["all_reduce", "buffer"]

# The tensors the loop's all_reduce calls reduce, one per (dtype, device, length), made once and
# reused for the whole run.
#
# A collective's work keeps its tensors, and the backend's own thread (gloo's worker, NCCL's
# watchdog) may drop the work after ``wait()`` returned. If that drop were the last reference to a
# tensor made in Python, the thread would need the GIL to free it; in a process that is exiting by
# then, it cannot, and the rank aborts with "terminate called without an active exception"
# (SIGABRT: torchrun reports the rank as failed). The stop flag after the last epoch is the last
# collective of most runs. Tensors that live as long as the process leave that thread nothing to
# free; PyTorch's account of the same shutdown race: https://github.com/pytorch/pytorch/pull/179291.
_BUFFERS: dict[tuple[torch.dtype, torch.device, int], torch.Tensor] = {}
# The works of those calls, likewise never left for the backend's thread to free last: the latest
# 32 to 64 are kept (the oldest 32 are dropped together, long after that thread is done with them).
_WORKS: list[Any] = []


def all_reduce(tensor: torch.Tensor, **kwargs: Any) -> None:
    """``dist.all_reduce(tensor, **kwargs)``, its work kept in :data:`_WORKS`."""
    work = dist.all_reduce(tensor, async_op=True, **kwargs)
    work.wait()
    _WORKS.append(work)
    if len(_WORKS) >= 64:
        del _WORKS[:32]


def buffer(dtype: torch.dtype, device: torch.device, length: int) -> torch.Tensor:
    """The reused all_reduce tensor of shape ``(length,)`` (its values are the caller's to set)."""
    key = (dtype, torch.device(device), length)
    buf = _BUFFERS.get(key)
    if buf is None:
        buf = _BUFFERS[key] = torch.zeros(length, dtype=dtype, device=device)
    return buf


def _keep_at_exit() -> None:
    """At exit, before the interpreter clears modules (and with them :data:`_BUFFERS` and
    :data:`_WORKS`), give each a reference that is never dropped, so that nothing a backend thread
    still holds is freed by it. The process is ending; a few scalars go back to the OS with it."""
    import ctypes

    for obj in [*_BUFFERS.values(), *_WORKS]:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))


atexit.register(_keep_at_exit)
