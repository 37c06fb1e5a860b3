"""TG604 replicas-diverged: data-parallel ranks hold different parameters.

What it watches: under ``torchrun`` only, after optimizer steps 1, 2, 5, 10, 20, 50, 100, ... (a
1-2-5 series) and at exit, a fingerprint of the parameters that should be replicas (two float64
sums per parameter, see ``sanitize/core/replicas.py``): those of the models wrapped in
``DistributedDataParallel``, or, without DDP, the optimizers' parameters when a
``DistributedSampler`` shards the data over every rank. Each rank puts its fingerprint in the c10d
store (never a collective); rank 0 compares the others' with its own as they arrive, without
waiting. At exit every rank sends the fingerprint taken at exit, if its parameters were not changed
in place since its last optimizer step (their version counters say so).

When it fires: on rank 0, the first time another rank's fingerprint after the same step (or at
exit) differs from rank 0's by more than ``RTOL`` (1e-6 relative): names the step, the ranks, the
first parameter that differs, and the cause: the model is not wrapped in DDP, the forward calls
``ddp.module`` directly (DDP's gradient all-reduce never runs), or the model is wrapped (a rank
stepped differently, or parameters were changed on one rank). At exit the step counts are given
too. Reported once, at the ``optimizer.step()`` line, ``ranks`` rank 0 and the ranks that differ.

Silent on: a correct DDP run (replicas are bit-identical after every step); models not meant as
replicas: FSDP and ``DTensor`` parameters, DDP over a subgroup of the ranks, parameters DDP ignores,
parameter shapes that differ across ranks, runs with neither DDP nor a ``DistributedSampler``
over every rank; parameters changed on one rank after its last step (loading the best weights on
rank 0 for a final test); an optimizer stepped inside another's step (``ZeroRedundancyOptimizer``
broadcasts after its inner step); a single process.

Cost: under torchrun, at the fingerprint steps (``replicas.is_checkpoint``), two sums per planned
parameter (one device sync) and one store message; rank 0 keeps 8 pending fingerprints at most; one
heap scan for DDP models per run (``bounds.live_objects``).

Reference: ``DistributedDataParallel`` (replicas start from rank 0's state and stay in sync by
gradient averaging) https://pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html;
GitHub NCAR/miles-credit#153 (the trainer dropped the DDP wrapper: independent models per GPU)
https://github.com/NCAR/miles-credit/pull/153; SchmiedmayerLab/OpenTSLM#49 (loss computed through
``model.module``) https://github.com/SchmiedmayerLab/OpenTSLM/pull/49.
"""

from __future__ import annotations

from typing import Any

from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.frames import user_location
from trainguard.sanitize.core.replicas import (Plan, decode, encode, fingerprint, first_difference,
                                          is_checkpoint, live_ddps, plan_replicas)
from trainguard.sanitize.core.values import readable

_PENDING = 8  # rank 0 keeps its own fingerprints of the last few checkpoints until peers' arrive

_CAUSES = {
    "unwrapped": (
        "the model is not wrapped in DistributedDataParallel, so each rank trains its own copy on "
        "its own shard of the data and rank 0's checkpoint holds rank 0's copy alone",
        "wrap the model once it is on its device: model = DistributedDataParallel(model), and "
        "call the wrapper in the training forward"),
    "bypassed": (
        "the model is wrapped in DistributedDataParallel but the forward calls `.module` "
        "directly, which bypasses DDP's gradient all-reduce",
        "call the DDP wrapper (ddp_model(x)), not ddp_model.module(x), in the training forward"),
    "ddp": (
        "the model is wrapped in DistributedDataParallel, so a rank stepped differently (a "
        "condition evaluated per rank, a skipped or repeated step) or parameters were changed on "
        "one rank (loaded, re-initialized or edited on one rank only)",
        "take the same optimizer steps on every rank, and load or change parameters on every "
        "rank (or broadcast them from rank 0)"),
}


class ReplicasDiverged(Check):
    code = "TG604"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.link = bus.ranks
        # fingerprints are compared at the same steps on every rank: settled steps included
        self.always = ("on_step",) if self.link is not None else ()
        self.sharded = False
        self.plan: Plan | None = None
        self.scanned: list[Any] | None = None
        self.pending: dict[int, tuple[list[float], Any]] = {}
        self.where: Any = None
        self.versions: tuple[int, int] | None = None
        self.done = False

    def on_sampler_iter(self, sampler: Any) -> None:
        if self.link is not None and getattr(sampler, "num_replicas", 1) == self.link.world_size:
            self.sharded = True

    def on_step(self, optimizer: Any) -> None:
        if self.link is None or self.done or self.state.in_step:
            return
        plan = self.plan
        if plan is not None and plan.params:
            self.versions = (plan.params[0]._version, plan.params[-1]._version)
        step = self.state.step
        if not is_checkpoint(step):
            return
        if plan is None or not plan.params:
            plan = self.plan = self._plan()
            if not plan.params:
                return
            self.versions = (plan.params[0]._version, plan.params[-1]._version)
        if not readable(*plan.params):
            return  # parameters whose values cannot be read (meta)
        values = fingerprint(plan.params)
        self.where = user_location()
        self.link.put(f"fp/{step}/{self.link.rank}", {"shapes": plan.digest, "fp": encode(values)})
        if self.link.rank == 0:
            self.pending[step] = (values, self.where)
            while len(self.pending) > _PENDING:
                del self.pending[min(self.pending)]
            self._compare_pending()

    def _plan(self) -> Plan:
        from torch.nn.parallel import DistributedDataParallel as DDP

        models = list(self.state.models)
        if self.scanned is None and not any(isinstance(m, DDP) for m in models):
            self.scanned = live_ddps()
        return plan_replicas(models, list(self.state.optimizers),
                             world_size=self.link.world_size, sharded=self.sharded,
                             live_ddps=self.scanned or [])

    def _compare_pending(self) -> None:
        peers = range(1, self.link.world_size)
        for step in sorted(self.pending):
            got = self.link.ready([f"fp/{step}/{r}" for r in peers])
            if got is None:
                continue
            values, where = self.pending.pop(step)
            self._compare(values, dict(zip(peers, got)), f"after optimizer step {step}", where)
            if self.done:
                return

    def _compare(self, own: list[float], others: dict[int, dict], when: str, where: Any,
                 steps: dict[int, int] | None = None) -> None:
        plan = self.plan
        diffs: dict[int, tuple[int, list[float]]] = {}
        for rank, data in others.items():
            if data.get("shapes") != plan.digest:
                self.done = True  # different shapes: these are not replicas
                return
            values = decode(data["fp"])
            index = first_difference(own, values)
            if index is not None:
                diffs[rank] = (index, values)
        if diffs:
            self._report(own, diffs, when, where, steps)

    def _report(self, own: list[float], diffs: dict[int, tuple[int, list[float]]], when: str,
                where: Any, steps: dict[int, int] | None) -> None:
        self.done = True
        ranks = sorted(diffs)
        first = ranks[0]
        index, other = diffs[first]
        param = self.plan.params[index]
        cause, fix = _CAUSES[self.plan.how]
        counted = ""
        if steps and len(set(steps.values())) > 1:
            counted = " (" + ", ".join(f"rank {r}: {n} steps" for r, n in sorted(steps.items())) + ")"
        who = f"rank {first}" if len(ranks) == 1 else f"ranks {', '.join(map(str, ranks))}"
        finding = self.bus.report(
            self.code,
            f"{when}{counted} the replicas differ: {who} hold{'s' if len(ranks) == 1 else ''} "
            f"other parameters than rank 0, first `{self.plan.names[index]}` "
            f"{tuple(param.shape)} (sum {own[2 * index]:.6g} on rank 0, {other[2 * index]:.6g} "
            f"on rank {first}); {cause}",
            fix=fix, where=where)
        if finding is not None:
            finding.ranks = sorted({0, *ranks, *(finding.ranks or [])})

    def rank_facts(self) -> Any:
        plan = self.plan
        if self.link is None or plan is None or not plan.params:
            return None
        now = (plan.params[0]._version, plan.params[-1]._version)
        if now != self.versions:
            return {"step": self.state.step, "changed": True}
        return {"step": self.state.step, "shapes": plan.digest,
                "fp": encode(fingerprint(plan.params))}

    def on_ranks(self, facts: dict[int, Any]) -> None:
        if self.done or self.plan is None or not self.plan.params:
            return
        self._compare_pending()
        own = facts.get(0, {})
        if self.done or "fp" not in own:
            return
        others = {r: f for r, f in facts.items() if r != 0 and "fp" in f}
        steps = {r: int(f.get("step", 0)) for r, f in facts.items() if r == 0 or r in others}
        self._compare(decode(own["fp"]), others, "at exit", self.where, steps)
