"""A user's own script calling ``trainguard.fit`` with a ``DistributedSampler``; run by the tests
under torchrun (2 ranks) and, with ``--reference``, in one process whose batches are the
concatenation of the two ranks' batches.

Usage: python fit_worker.py RUN_DIR [--reference]
"""

from __future__ import annotations

import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import trainguard

PER_RANK_BATCH = 4
WORLD = 2
SAMPLES = 64  # divisible by WORLD * PER_RANK_BATCH: no padding, no partial batch
EPOCHS = 2


def dataset(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(n, 6, generator=g), torch.randint(0, 3, (n,), generator=g))


def model() -> nn.Module:
    torch.manual_seed(7)  # no dropout, no BatchNorm: DDP is exactly gradient averaging
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))


class ConcatRanks:
    """One process's batch sampler: batch b is rank 0's batch b followed by rank 1's."""

    def __init__(self, data: TensorDataset) -> None:
        self.samplers = [DistributedSampler(data, num_replicas=WORLD, rank=r, shuffle=True,
                                            seed=3) for r in range(WORLD)]

    def set_epoch(self, epoch: int) -> None:
        for s in self.samplers:
            s.set_epoch(epoch)

    def __iter__(self):
        orders = [list(s) for s in self.samplers]
        for b in range(len(self)):
            yield [i for order in orders
                   for i in order[b * PER_RANK_BATCH:(b + 1) * PER_RANK_BATCH]]

    def __len__(self) -> int:
        return SAMPLES // (WORLD * PER_RANK_BATCH)


def main(run_dir: str, reference: bool) -> None:
    train, val = dataset(SAMPLES, 0), dataset(30, 1)
    if reference:
        loader = DataLoader(train, batch_sampler=ConcatRanks(train))
    else:
        trainguard.init_distributed("cpu")  # DistributedSampler needs the process group
        loader = DataLoader(train, batch_size=PER_RANK_BATCH,
                            sampler=DistributedSampler(train, shuffle=True, seed=3))
    net = model()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-2)
    history = trainguard.fit(net, loader, DataLoader(val, batch_size=8), opt,
                             nn.CrossEntropyLoss(), epochs=EPOCHS, device="cpu", seed=0,
                             run_dir=run_dir, progress="none", plot=False)
    print(f"rank-done weights_sha256={history.weights_sha256}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], "--reference" in sys.argv[2:])
