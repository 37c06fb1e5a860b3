"""What ``fit`` does differently under ``torchrun``: set-up of the process group.

Each process gets one :class:`~trainguard.loop.ddp.Distributed` (:data:`SINGLE` without a
launcher). Under ``torchrun`` (``WORLD_SIZE`` > 1 in the environment, see
https://pytorch.org/docs/stable/elastic/run.html#environment-variables) :func:`setup`:

- initializes the default process group from the launcher's environment (``env://``: ``RANK``,
  ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``) with NCCL on CUDA and gloo on
  CPU, unless the script already did;
- puts each rank on ``cuda:LOCAL_RANK`` when it trains on CUDA;
- creates a gloo group for the per-step stop flag, so agreeing on a signal never makes the host
  wait for the GPU.
"""

from __future__ import annotations

import atexit
import datetime
import gc
import os

import torch
import torch.distributed as dist

from trainguard.errors import UsageError
from trainguard.loop.ddp import RANK_KEYS, SINGLE, Distributed

__all__ = ["Distributed", "SINGLE", "setup", "init_distributed", "launch_env", "RANK_KEYS"]

_TIMEOUT = datetime.timedelta(minutes=30)


def launch_env() -> tuple[int, int, int]:
    """``(rank, world_size, local_rank)`` as the launcher set them; ``(0, 1, 0)`` without one.

    Raises:
        UsageError: a variable is not an integer, or ``RANK`` is outside ``[0, WORLD_SIZE)``.
    """
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
        local = int(os.environ.get("LOCAL_RANK", "0"))
    except ValueError:
        raise UsageError("RANK, WORLD_SIZE and LOCAL_RANK must be integers (as torchrun sets "
                         f"them), got RANK={os.environ.get('RANK')!r} WORLD_SIZE="
                         f"{os.environ.get('WORLD_SIZE')!r} LOCAL_RANK="
                         f"{os.environ.get('LOCAL_RANK')!r}") from None
    if world < 1 or not 0 <= rank < world:
        raise UsageError(f"RANK={rank} is not in [0, WORLD_SIZE={world}); launch with torchrun, "
                         "which sets both")
    return rank, world, local


_current: Distributed | None = None


def _destroy() -> None:
    """At exit: free garbage cycles, then the process group this module initialized.

    A ``DistributedDataParallel`` model is a reference cycle, so after ``fit`` returns it lives
    until a full collection; left to the interpreter's own at finalization, its reducer is freed
    after the process group and a gloo thread that needs the GIL aborts the rank ("terminate
    called without an active exception", pytorch/pytorch#179291). Collecting first frees it
    while the group and the interpreter are alive."""
    if dist.is_available() and dist.is_initialized():
        gc.collect()
        dist.destroy_process_group()


def _init_process_group(backend: str) -> None:
    """``init_process_group(backend)`` from the launcher's environment, destroyed at exit.

    ``torch.distributed.nn.functional`` (which constructing ``DistributedDataParallel`` imports)
    binds ``group=group.WORLD`` as a default argument when it is first imported. Imported after
    the default group exists, it holds that group until the interpreter clears modules, so
    ``destroy_process_group`` cannot free it: gloo's worker threads outlive the exit handler and
    are joined during finalization, where one that needs the GIL aborts the rank ("terminate
    called without an active exception"). Imported first, its defaults are ``None``.
    """
    import torch.distributed.nn.functional  # noqa: F401  (see above)

    dist.init_process_group(backend, timeout=_TIMEOUT)
    atexit.register(_destroy)


def setup(device: torch.device) -> Distributed:
    """The process's :class:`Distributed`, initializing the process group on first use.

    Without a launcher (``WORLD_SIZE`` unset or 1) and without an initialized process group this
    is :data:`SINGLE`. A process group the script initialized itself is used as it is (and left
    for the script to destroy); one this function initialized is destroyed at exit.

    Args:
        device: the device the rank trains on; CUDA selects NCCL and ``cuda:LOCAL_RANK``.

    Raises:
        UsageError: malformed launcher variables, or ``torch.distributed`` unavailable.
    """
    global _current
    rank, world, local = launch_env()
    initialized = dist.is_available() and dist.is_initialized()
    if world == 1 and not initialized:
        return SINGLE
    if _current is not None and initialized:
        return _current
    if not dist.is_available():
        raise UsageError(f"WORLD_SIZE={world} but this torch build has no torch.distributed")
    if not initialized:
        cuda = device.type == "cuda"
        if cuda:
            torch.cuda.set_device(device.index if device.index is not None else local)
        _init_process_group("nccl" if cuda else "gloo")
    else:
        rank, world = dist.get_rank(), dist.get_world_size()
        local = int(os.environ.get("LOCAL_RANK", rank))
    if world == 1:
        _current = SINGLE
        return SINGLE
    flag_group = dist.new_group(backend="gloo") if dist.get_backend() != "gloo" else None
    _current = Distributed(rank=rank, world_size=world, local_rank=local, enabled=True,
                           _flag_group=flag_group)
    return _current


def init_distributed(device: str | torch.device = "auto") -> Distributed:
    """Initialize the process group from torchrun's environment, before building loaders.

    ``fit`` does this itself; call it first when your script needs the process group earlier,
    e.g. to build a ``DistributedSampler``. Without a launcher it returns the single-process
    :class:`Distributed` (``rank`` 0, ``world_size`` 1) and initializes nothing.

    Args:
        device: as in ``fit``; CUDA selects NCCL and ``cuda:LOCAL_RANK``, CPU selects gloo.

    Returns:
        The process's :class:`Distributed` (``.rank``, ``.world_size``, ``.is_main``).

    Raises:
        UsageError: a bad device, or malformed launcher variables.

    Example::

        ddp = trainguard.init_distributed()
        loader = DataLoader(data, batch_size=32, sampler=DistributedSampler(data))
        trainguard.fit(model, loader, val_loader, optimizer, loss_fn, epochs=5, run_dir="runs/a")
    """
    from trainguard.loop.device import resolve_device

    return setup(resolve_device(device))
