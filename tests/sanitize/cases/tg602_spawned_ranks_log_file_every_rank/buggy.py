# Modelled on facebookresearch/ParlAI#2108 (https://github.com/facebookresearch/ParlAI/pull/2108,
# "only log tensorboard on the primary worker"): a distributed trainer builds its metrics logger on
# every rank, and the logger appends JSON records to one events file, so the file holds every
# record once per rank, interleaved. The script starts its own ranks with torch.multiprocessing.
import json
import os
import socket
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel


class MetricsLogger:
    def __init__(self, logdir):
        self.fh = open(os.path.join(logdir, "events.jsonl"), "a")

    def add(self, tag, step, value):
        self.fh.write(json.dumps({"tag": tag, "step": step, "value": value}) + "\n")

    def close(self):
        self.fh.close()


def main_worker(rank, world_size, port, logdir):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world_size)
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Linear(6, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    logger = MetricsLogger(logdir)  # expect: TG602
    gen = torch.Generator().manual_seed(rank)
    for step in range(4):
        x, y = torch.randn(8, 6, generator=gen), torch.randint(0, 2, (8,), generator=gen)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if logger is not None:
            logger.add("train/loss", step, loss.item())
    if logger is not None:
        logger.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    logdir = tempfile.mkdtemp()
    mp.spawn(main_worker, args=(2, port, logdir), nprocs=2)
    with open(os.path.join(logdir, "events.jsonl")) as fh:
        print(sum(1 for _ in fh), "records")
