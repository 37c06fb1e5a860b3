"""One :class:`Distributed` object per process: its rank and the few collectives ``fit`` needs.

A single process gets :data:`SINGLE`, whose methods return their input unchanged, so the
single-process loop runs exactly the code it ran before (same speed, bit-identical weights).
Rank 0 alone writes files; every collective below is called by every rank at the same point of
the loop (after the same optimizer step), which is what keeps them from hanging.
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping

import torch
import torch.distributed as dist
from torch import nn

from trainguard.ckpt.seeding import derive_seed
from trainguard.errors import UsageError
from trainguard.loop.collectives import all_reduce, buffer

__all__ = ["Distributed", "SINGLE", "RANK_KEYS"]

# Checkpoint keys that differ between ranks: stored per rank under "ranks" (rank 0's at the top).
RANK_KEYS = ("rng", "epoch_start_rng", "epoch_loss_sum", "epoch_samples")

_NULL = contextlib.nullcontext()  # reusable


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
        """The signal every rank stops on: the largest one any rank received, else ``None``."""
        return self.agreed_stop(received, False)[0]

    def agreed_stop(self, received: int | None, requested: bool) -> tuple[int | None, bool]:
        """``(signal, requested)`` agreed by every rank: the largest signal any rank received
        (else ``None``), and whether a callback on any rank asked to stop.

        One all_reduce (MAX) of two CPU ints over the gloo group per call; a single process
        returns its own values without communicating.
        """
        if not self.enabled:
            return received, requested
        flags = buffer(torch.int32, torch.device("cpu"), 2)
        flags[0], flags[1] = received or 0, int(requested)
        all_reduce(flags, op=dist.ReduceOp.MAX, group=self._flag_group)
        signum, asked = flags.tolist()
        return signum or None, bool(asked)

    def no_sync(self, model: nn.Module, sync: bool) -> Any:
        """``model.no_sync()`` when ``sync`` is False and ``model`` is DDP, else a no-op context.

        Inside it DDP accumulates gradients locally instead of all-reducing them; the backward of
        the accumulation window's last micro-batch runs outside it and all-reduces the sum
        (https://pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html
        , ``no_sync``). Both the forward and the backward must run inside the context.
        """
        if sync or not isinstance(model, nn.parallel.DistributedDataParallel):
            return _NULL
        return model.no_sync()

    def mean(self, total: torch.Tensor, count: int) -> float:
        """``sum(total) / sum(count)`` over ranks (one host sync); ``nan`` when nothing counted."""
        if not self.enabled:
            return total.item() / count if count else float("nan")
        both = buffer(torch.float64, total.device, 2)
        both[0] = total.detach().reshape(())
        both[1] = float(count)
        all_reduce(both)
        summed, n = both.tolist()
        return summed / n if n else float("nan")

    def reduce_means(self, sums: Any, device: torch.device) -> dict[str, float]:
        """Sample-weighted means of a ``MetricSums`` over every rank's shard."""
        if not self.enabled:
            return sums.means()
        names = sorted(sums.sums)
        values = [float(sums.sums[k]) for k in names] + [float(sums.count)]
        summed = buffer(torch.float64, device, len(values))
        summed.copy_(torch.tensor(values, dtype=torch.float64))
        all_reduce(summed)
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
