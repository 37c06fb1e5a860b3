"""A script of one's own: gradient accumulation under DDP through ``trainguard.fit``, counting
the gradient all-reduces with a DDP communication hook. Run by the tests under torchrun (2 ranks).

Usage: python accumulate_worker.py RUN_DIR [--sync-every-micro-step] [--resume]
           [--stop-at-micro N] [--tensorboard]

64 samples, 4 per rank and micro-batch: 8 micro-batches per rank and epoch; with
``accumulate_grad_batches=3`` the windows are 3, 3 and 2 micro-batches (a short last window),
so 2 epochs take 6 optimizer steps and 16 micro-steps.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import trainguard


# The works of the counting hook's all-reduces, kept for the life of the process (a module global,
# not a local of main(), which is gone before the process group is destroyed at exit), as
# trainguard.loop.collectives keeps its own: gloo's worker thread must never drop the last
# reference to one while the rank exits (pytorch/pytorch#179291).
_WORKS: list = []


def _keep_at_exit() -> None:
    """At exit, before the interpreter clears this module, give each kept work a reference that
    is never dropped (as trainguard.loop.collectives does with its own)."""
    for work in _WORKS:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(work))


atexit.register(_keep_at_exit)


def dataset(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(n, 6, generator=g), torch.randint(0, 3, (n,), generator=g))


def main(argv: list[str]) -> None:
    run_dir, flags = argv[0], argv[1:]
    trainguard.init_distributed("cpu")
    torch.manual_seed(7)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    ddp = nn.parallel.DistributedDataParallel(model)
    count = [0]

    def counting_hook(state, bucket):
        # PyTorch's allreduce_hook, without its ``.then`` callback: that Python callable runs on,
        # and is dropped by, gloo's worker thread, which then needs the GIL; at exit the rank
        # aborts (pytorch/pytorch#179291). The all-reduce is waited for here and its work kept.
        count[0] += 1
        tensor = bucket.buffer()
        tensor.div_(dist.get_world_size())
        work = dist.all_reduce(tensor, async_op=True)
        work.wait()
        _WORKS.append(work)
        done = torch.futures.Future()
        done.set_result(tensor)
        return done

    ddp.register_comm_hook(None, counting_hook)
    if "--sync-every-micro-step" in flags:
        ddp.no_sync = contextlib.nullcontext  # every backward all-reduces
    if "--stop-at-micro" in flags and dist.get_rank() == 0:
        stop_at, forwards = int(flags[flags.index("--stop-at-micro") + 1]), [0]

        def stop(module, inputs):
            if module.training:
                forwards[0] += 1
                if forwards[0] == stop_at:  # rank 0 alone: the ranks agree on the stop step
                    os.kill(os.getpid(), signal.SIGTERM)
        model.register_forward_pre_hook(stop)
    train = dataset(64, 0)
    loader = DataLoader(train, batch_size=4, sampler=DistributedSampler(train, seed=3))
    loggers = ["csv", "tensorboard"] if "--tensorboard" in flags else ["csv"]
    try:
        history = trainguard.fit(
            ddp, loader, DataLoader(dataset(16, 1), batch_size=8),
            torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9), nn.CrossEntropyLoss(),
            epochs=2, accumulate_grad_batches=3, device="cpu", seed=0, run_dir=run_dir,
            progress="none", plot=False, handle_signals=True, loggers=loggers,
            resume=run_dir if "--resume" in flags else None)
    finally:
        print(f"rank={dist.get_rank()} allreduce-count={count[0]}", flush=True)
    print(f"rank={dist.get_rank()} steps={history.step} weights_sha256="
          f"{history.weights_sha256}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
