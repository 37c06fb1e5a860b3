"""Parameter fingerprints for comparing data-parallel replicas across ranks (TG604).

A fingerprint holds two float64 numbers per parameter: the sum and the sum of absolute values of
its elements. It is computed read-only (``detach()``, then a float64 copy of one parameter at a
time), with one device-to-host copy for the whole model, and never changes a value the user
computes. Replicas that DDP keeps in sync hold bit-identical parameters after each optimizer step
(gradients are all-reduced, then every rank applies the same update), so their fingerprints are
equal; two ranks that trained different copies differ after the first step.
"""

from __future__ import annotations

import base64
import hashlib
import math
import struct
from typing import Any, Iterable

__all__ = ["is_checkpoint", "fingerprint", "encode", "decode", "shapes_digest",
           "first_difference", "RTOL", "Plan", "plan_replicas", "live_ddps"]

RTOL = 1e-6
"""Two fingerprints differ when a sum or sum of absolute values differs by more than ``RTOL``
times the parameter's sum of absolute values. In-sync replicas are bit-identical (measured on
gloo: equal to the last bit after 20 SGD-momentum steps with BatchNorm); the tolerance only
absorbs a last-bit difference between devices that compute the same float64 sum, while one SGD
step on different data moves the sums by far more."""


def is_checkpoint(step: int) -> bool:
    """Whether replicas are compared after optimizer step ``step``: 1, 2, 5, 10, 20, 50, 100, ...

    A 1-2-5 series catches a model trained separately on each rank after its first step, and keeps
    the store traffic logarithmic in the run's length (about 3 exchanges per tenfold steps).
    """
    if step < 1:
        return False
    while step % 10 == 0:
        step //= 10
    return step in (1, 2, 5)


def fingerprint(params: Iterable[Any]) -> list[float]:
    """``[sum_0, abs_sum_0, sum_1, abs_sum_1, ...]`` in float64 for ``params`` (tensors of any
    shape and floating or complex dtype; a complex tensor counts as its real view)."""
    import torch

    rows = []
    for p in params:
        d = p.detach()
        if d.is_complex():
            d = torch.view_as_real(d)
        d = d.to(torch.float64)
        rows.append(torch.stack((d.sum(), d.abs().sum())))
    if not rows:
        return []
    return torch.stack(rows).flatten().cpu().tolist()  # note: one device sync per fingerprint


def shapes_digest(params: Iterable[Any]) -> str:
    """A short digest of the parameters' shapes and dtypes: replicas have the same."""
    text = ";".join(f"{tuple(p.shape)}:{p.dtype}" for p in params)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def encode(values: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(values)}d", *values)).decode("ascii")


def decode(text: str) -> list[float]:
    raw = base64.b64decode(text)
    return list(struct.unpack(f"<{len(raw) // 8}d", raw))


def first_difference(a: list[float], b: list[float], *, rtol: float = RTOL) -> int | None:
    """Index of the first parameter whose fingerprints differ, or None when all agree.

    Raises:
        ValueError: the fingerprints cover different numbers of parameters.
    """
    if len(a) != len(b):
        raise ValueError(f"fingerprints of {len(a) // 2} and {len(b) // 2} parameters")
    for i in range(0, len(a), 2):
        scale = max(abs(a[i + 1]), abs(b[i + 1]))
        for x, y in ((a[i], b[i]), (a[i + 1], b[i + 1])):
            if x == y or (math.isnan(x) and math.isnan(y)):
                continue
            if not abs(x - y) <= rtol * scale:  # also true when exactly one is NaN
                return i // 2
    return None


class Plan:
    """Which parameters are meant to be replicas, and how the model is run.

    Attributes:
        names: qualified parameter names, in fingerprint order.
        params: the parameters (strong references: the model is alive while it trains).
        how: ``"ddp"`` (wrapped and called through DDP), ``"bypassed"`` (wrapped, but the forward
            calls ``ddp.module`` directly) or ``"unwrapped"`` (no DDP; a ``DistributedSampler``
            shards the data over every rank). Empty ``params``: nothing to compare.
        digest: :func:`shapes_digest` of ``params``.
    """

    def __init__(self, named: list[tuple[str, Any]] | None = None, how: str = "") -> None:
        named = named or []
        self.names = [n for n, _ in named]
        self.params = [p for _, p in named]
        self.how = how
        self.digest = shapes_digest(self.params) if self.params else ""


def plan_replicas(models: list[Any], optimizers: list[Any], *, world_size: int, sharded: bool,
                  live_ddps: list[Any]) -> Plan:
    """The parameters that every rank should hold identically, or an empty :class:`Plan`.

    Args:
        models: outermost modules called so far.
        optimizers: optimizers that have stepped.
        world_size: processes in the job.
        sharded: a ``DistributedSampler`` over ``world_size`` replicas was iterated.
        live_ddps: ``DistributedDataParallel`` objects alive in the process (found once, to tell
            a bypassed wrapper from no wrapper).

    Empty for sharded parameters (FSDP, ``DTensor``), DDP over a subgroup of the ranks (hybrid
    parallelism: replicas only within the group), and runs that show no data parallelism.
    """
    from torch.nn.parallel import DistributedDataParallel as DDP

    every = [p for m in models for p in m.parameters()]
    if any(_sharded_type(x) for x in [*models, *every]):
        return Plan()
    called = [m for m in models if isinstance(m, DDP)]
    bypassed = [d for d in live_ddps if any(d.module is m for m in models)] if not called else []
    wrappers = called or bypassed
    if wrappers:
        if any(_group_size(d) != world_size for d in wrappers):
            return Plan()
        named = [(n, p) for d in wrappers for n, p in d.module.named_parameters()
                 if p.requires_grad and n not in getattr(d, "parameters_to_ignore", ())]
        return Plan(named, "ddp" if called else "bypassed")
    if not sharded:
        return Plan()
    names = {id(p): n for m in models for n, p in m.named_parameters()}
    seen: set[int] = set()
    named = []
    for opt in optimizers:
        for group in opt.param_groups:
            for p in group["params"]:
                if id(p) not in seen:
                    seen.add(id(p))
                    named.append((names.get(id(p), f"param {len(named)}"), p))
    return Plan(named, "unwrapped")


def _sharded_type(obj: Any) -> bool:
    return type(obj).__name__ in ("FullyShardedDataParallel", "DTensor", "FlatParameter")


def _group_size(ddp: Any) -> int:
    group = getattr(ddp, "process_group", None)
    try:
        return int(group.size())
    except Exception:
        return -1


def live_ddps() -> list[Any]:
    """Every ``DistributedDataParallel`` object alive now (one walk over the garbage collector's
    objects: done once per run, when no DDP model was called)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    from trainguard.sanitize.core.bounds import live_objects

    # type(), not isinstance: some objects warn when their __class__ is read
    return list(live_objects(lambda o: DDP in type(o).__mro__))
