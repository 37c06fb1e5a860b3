"""TG603 batchnorm-not-synced: BatchNorm under DDP normalizes over a few samples per rank.

What it watches: under ``torchrun`` only (in a single process no BatchNorm call reaches the
watcher), the calls of ``BatchNorm1d/2d/3d`` (not ``SyncBatchNorm``) in training mode inside a
module wrapped in ``DistributedDataParallel`` whose process group has more than one rank: the
batch size (dimension 0 of the input) of the first three training forwards of each DDP model.

When it fires: when the largest of those per-rank batches is under 16 samples. DDP averages
gradients across ranks, but BatchNorm's statistics stay local: each rank normalizes with the mean
and variance of its own few samples, and the running statistics used in ``eval()`` are rank 0's
(DDP broadcasts rank 0's buffers). The threshold comes from the GroupNorm paper's ImageNet
ResNet-50 study (Wu and He, 2018, Figure 1): BatchNorm's error is 23.6% at 32 images per GPU and
23.7% at 16, then 24.8%, 27.3% and 34.7% at 8, 4 and 2. A hint, reported once per DDP model at the
user's line that calls it, naming the layers, the per-rank and the global batch.

Silent on: ``SyncBatchNorm`` (converted models), BatchNorm in ``eval()`` mode (frozen backbones),
16 or more samples per rank, models not wrapped in DDP, a DDP group of one rank, a single process.
Only the first three forwards are measured, so a short last batch of an epoch never fires it.

Cost: per checked BatchNorm call under DDP, its batch size, for the first 3 forwards of each model;
at exit, one pass over each such model's modules.

Reference: ``torch.nn.SyncBatchNorm`` https://pytorch.org/docs/stable/generated/torch.nn.SyncBatchNorm.html;
Wu and He, "Group Normalization" (2018) https://arxiv.org/abs/1803.08494; GitHub
fundamentalvision/BEVFormer#136 (one sample per GPU without SyncBatchNorm)
https://github.com/fundamentalvision/BEVFormer/issues/136.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.frames import user_location

SMALL_BATCH = 16  # samples per rank; below it BatchNorm's statistics degrade (GroupNorm paper)
FORWARDS_MEASURED = 3


@dataclass
class _Model:
    where: Any
    world: int
    max_batch: int = 0
    forwards: int = 0
    last_root: int = -1
    decided: bool = False


class BatchNormNotSynced(Check):
    code = "TG603"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.models: weakref.WeakKeyDictionary[Any, _Model] = weakref.WeakKeyDictionary()
        if bus.ranks is not None:
            from torch.nn.modules.batchnorm import _BatchNorm
            from torch.nn.parallel import DistributedDataParallel

            self.module_types = (_BatchNorm,)  # an instance attribute: only under torchrun
            self._ddp = DistributedDataParallel

    def on_forward_pre(self, call: Any) -> None:
        from torch.nn import SyncBatchNorm

        bn = call.module
        modules = self.state.modules
        if not bn.training or isinstance(bn, SyncBatchNorm) or len(modules) < 2:
            return
        root = modules[0]
        if not isinstance(root, self._ddp):
            return
        model = self.models.get(root)
        if model is None:
            group = getattr(root, "process_group", None)
            stack = self.state.stack  # empty on a settled step: the BatchNorm's own line
            model = self.models[root] = _Model(stack[0].where if stack else user_location(),
                                               group.size() if group is not None else 1)
        if model.decided:
            return
        x = call.args[0] if call.args else None
        if getattr(x, "dim", None) is None or x.dim() < 2:
            return
        if model.last_root != self.state.root_forwards:
            model.last_root = self.state.root_forwards
            model.forwards += 1
            if model.forwards > FORWARDS_MEASURED:
                self._decide(root, model)
                return
        model.max_batch = max(model.max_batch, int(x.shape[0]))

    def on_exit(self) -> None:
        for root, model in list(self.models.items()):
            if not model.decided:
                self._decide(root, model)

    def _decide(self, root: Any, model: _Model) -> None:
        from torch.nn import SyncBatchNorm
        from torch.nn.modules.batchnorm import _BatchNorm

        model.decided = True
        if model.world < 2 or model.max_batch >= SMALL_BATCH or model.max_batch == 0:
            return
        layers = [name for name, m in root.module.named_modules()
                  if isinstance(m, _BatchNorm) and not isinstance(m, SyncBatchNorm) and m.training]
        shown = ", ".join(layers[:4]) + (f", ... ({len(layers)} layers)" if len(layers) > 4 else "")
        n = model.max_batch
        self.report(
            f"BatchNorm layers of {type(root.module).__name__} ({shown}) train under "
            f"DistributedDataParallel on {n} sample{'s' if n != 1 else ''} per rank (global batch "
            f"{n * model.world} over {model.world} ranks): each rank normalizes with the "
            f"statistics of its own {n} sample{'s' if n != 1 else ''}, and eval() uses rank 0's "
            "running statistics",
            fix="convert before wrapping: model = nn.SyncBatchNorm.convert_sync_batchnorm(model) "
                "(CUDA), or train on 16 or more samples per rank, or use GroupNorm",
            where=model.where)
