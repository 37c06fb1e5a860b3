"""What ``fit`` does differently under ``torchrun``: one :class:`Distributed` object per process.

A single process gets :data:`SINGLE`, whose methods return their input unchanged, so the
single-process loop runs exactly the code it ran before (same speed, bit-identical weights).
Under ``torchrun`` (``WORLD_SIZE`` > 1 in the environment, see
https://pytorch.org/docs/stable/elastic/run.html#environment-variables) :func:`setup`:

- initializes the default process group from the launcher's environment (``env://``: ``RANK``,
  ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``) with NCCL on CUDA and gloo on
  CPU, unless the script already did;
- puts each rank on ``cuda:LOCAL_RANK`` when it trains on CUDA;
- creates a gloo group for the per-step stop flag, so agreeing on a signal never makes the host
  wait for the GPU.

Rank 0 alone writes files; every collective below is called by every rank at the same point of
the loop (after the same optimizer step), which is what keeps them from hanging.
"""

from __future__ import annotations

import atexit
import datetime
import os
import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping

import torch
import torch.distributed as dist
from torch import nn

from trainguard.ckpt.seeding import derive_seed
from trainguard.errors import UsageError

__all__ = ["Distributed", "SINGLE", "setup", "init_distributed", "launch_env", "RANK_KEYS"]

# Checkpoint keys that differ between ranks: stored per rank under "ranks" (rank 0's at the top).
RANK_KEYS = ("rng", "epoch_start_rng", "epoch_loss_sum", "epoch_samples")

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


@dataclass
class Distributed:
    """The process's place in the job and the few collectives the loop needs.

    Attributes:
        rank: global rank, ``0 <= rank < world_size``.
        world_size: processes in the job.
        local_rank: rank on this node (selects ``cuda:LOCAL_RANK``).
        enabled: more than one process: the collectives below communicate.
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    enabled: bool = False
    _flag_group: Any = field(default=None, repr=False)

    @property
    def is_main(self) -> bool:
        """Rank 0: the one process that writes logs, plots, ``summary.json`` and checkpoints."""
        return self.rank == 0

    # -- set-up
    def device(self, device: torch.device) -> torch.device:
        """Rank ``r`` on a CUDA node trains on ``cuda:LOCAL_RANK`` (a plain ``cuda`` would put
        every rank on GPU 0)."""
        if self.enabled and device.type == "cuda" and device.index is None:
            return torch.device("cuda", self.local_rank)
        return device

    def rank_seed(self, seed: int) -> int:
        """Rank 0 uses ``seed`` itself (so one process under torchrun is the plain run); rank
        ``r`` > 0 uses ``derive_seed(seed, r)``, so dropout masks differ between ranks."""
        return seed if self.rank == 0 else derive_seed(seed, self.rank)

    def wrap(self, model: nn.Module, device: torch.device, *, sync_batchnorm: bool) -> nn.Module:
        """``DistributedDataParallel(model)`` (after ``SyncBatchNorm`` conversion when asked), or
        ``model`` itself in a single process or when it is already wrapped.

        Raises:
            UsageError: ``sync_batchnorm`` on CPU (PyTorch's SyncBatchNorm needs CUDA tensors).
        """
        if not self.enabled or isinstance(model, nn.parallel.DistributedDataParallel):
            return model
        if sync_batchnorm:
            if device.type != "cuda":
                raise UsageError("sync_batchnorm=True needs CUDA: PyTorch's SyncBatchNorm "
                                 "refuses CPU tensors; on CPU use GroupNorm, larger per-rank "
                                 "batches, or sync_batchnorm=False")
            # keeps the Parameter objects, so the optimizer built over them stays valid
            model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
        ids = [device.index] if device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(model, device_ids=ids)

    def local_module(self, model: nn.Module) -> nn.Module:
        """The module inside DDP, for evaluation: a DDP forward broadcasts buffers (a collective),
        which would hang when ranks hold different numbers of validation batches."""
        if self.enabled and isinstance(model, nn.parallel.DistributedDataParallel):
            return model.module
        return model

    def check_sharded(self, loader: Any) -> None:
        """Warn when a training loader gives every rank the whole dataset."""
        if not self.enabled:
            return
        from torch.utils.data import DistributedSampler

        from trainguard.data.sampler import EpochBatchSampler

        sampler = getattr(loader, "sampler", None)
        batch_sampler = getattr(loader, "batch_sampler", None)
        if isinstance(sampler, DistributedSampler) or isinstance(
                getattr(batch_sampler, "sampler", None), DistributedSampler):
            return
        if isinstance(batch_sampler, EpochBatchSampler) \
                and batch_sampler.num_replicas == self.world_size:
            return
        warnings.warn(
            f"rank {self.rank}: the training loader is not sharded across the {self.world_size} "
            "ranks, so every rank trains on the whole dataset each epoch; build it with "
            "DataLoader(..., sampler=DistributedSampler(dataset)) or trainguard.make_loader(..., "
            f"num_replicas={self.world_size}, rank={self.rank})", stacklevel=3)

    # -- collectives (every rank calls them at the same point)
    def agreed_signal(self, received: int | None) -> int | None:
        """The signal every rank stops on: the largest one any rank received, else ``None``.

        One all_reduce of a CPU int over the gloo group per call; a single process returns
        ``received`` without communicating.
        """
        if not self.enabled:
            return received
        flag = _buffer(torch.int32, torch.device("cpu"), 1).fill_(received or 0)
        _all_reduce(flag, op=dist.ReduceOp.MAX, group=self._flag_group)
        value = int(flag.item())
        return value or None

    def mean(self, total: torch.Tensor, count: int) -> float:
        """``sum(total) / sum(count)`` over ranks (one host sync); ``nan`` when nothing counted."""
        if not self.enabled:
            return total.item() / count if count else float("nan")
        both = _buffer(torch.float64, total.device, 2)
        both[0] = total.detach().reshape(())
        both[1] = float(count)
        _all_reduce(both)
        summed, n = both.tolist()
        return summed / n if n else float("nan")

    def reduce_means(self, sums: Any, device: torch.device) -> dict[str, float]:
        """Sample-weighted means of a ``MetricSums`` over every rank's shard."""
        if not self.enabled:
            return sums.means()
        names = sorted(sums.sums)
        values = [float(sums.sums[k]) for k in names] + [float(sums.count)]
        summed = _buffer(torch.float64, device, len(values))
        summed.copy_(torch.tensor(values, dtype=torch.float64))
        _all_reduce(summed)
        *totals, n = summed.tolist()
        return {k: v / n for k, v in zip(names, totals)} if n else {}

    def sync_buffers(self, model: nn.Module) -> None:
        """Broadcast rank 0's buffers (BatchNorm running statistics) to every rank.

        DDP broadcasts them at the start of each training forward, then every rank updates its
        own copy from its own shard; evaluating or fingerprinting on the ranks' own copies would
        give each rank a different answer.
        """
        if not self.enabled:
            return
        for buf in model.buffers():
            dist.broadcast(buf, src=0)

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj`` (picklable), in rank order, on every rank."""
        if not self.enabled:
            return [obj]
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every rank."""
        if not self.enabled:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier(group=self._flag_group)

    # -- checkpoints
    def add_rank_states(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Gather each rank's :data:`RANK_KEYS` into ``payload["ranks"]`` (a list in rank order);
        the top-level values stay rank 0's. Every rank must call it."""
        if self.enabled:
            payload["ranks"] = self.gather({k: payload[k] for k in RANK_KEYS})
            payload["world_size"] = self.world_size
        return payload

    def own_rank_view(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """``payload`` with :data:`RANK_KEYS` taken from this rank's entry in ``"ranks"``.

        A checkpoint of another world size (resumed with ``force``) keeps the top-level
        (rank 0's) values: the run continues, but not bit-exactly.
        """
        payload = dict(payload)
        ranks = payload.get("ranks")
        if self.enabled and ranks is not None and len(ranks) == self.world_size:
            payload.update(ranks[self.rank])
        return payload


SINGLE = Distributed()

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


def _all_reduce(tensor: torch.Tensor, **kwargs: Any) -> None:
    """``dist.all_reduce(tensor, **kwargs)``, its work kept in :data:`_WORKS`."""
    work = dist.all_reduce(tensor, async_op=True, **kwargs)
    work.wait()
    _WORKS.append(work)
    if len(_WORKS) >= 64:
        del _WORKS[:32]


def _buffer(dtype: torch.dtype, device: torch.device, length: int) -> torch.Tensor:
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

_current: Distributed | None = None


def _destroy() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


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
        dist.init_process_group("nccl" if cuda else "gloo", timeout=_TIMEOUT)
        atexit.register(_destroy)
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
    from trainguard.loop.fit import resolve_device

    return setup(resolve_device(device))
