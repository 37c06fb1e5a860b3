# Fixed twin of buggy.py (https://github.com/talmolab/sleap-nn/pull/271): only rank 0 builds the
# metrics writer; the other ranks get None and write nothing.
import csv
import os
import socket
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel


class CSVMetricsWriter:
    def __init__(self, path):
        self.path = path

    def log(self, step, metrics):
        with open(self.path, "a", newline="") as fh:
            csv.writer(fh).writerow([step, *metrics.values()])


def make_writer(cfg, rank):
    if rank != 0:
        return None
    return CSVMetricsWriter(os.path.join(cfg["run_dir"], "metrics.csv"))


class KeypointTrainer:
    def __init__(self, model, writer):
        self.model, self.writer = model, writer
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def fit(self, gen, steps):
        for step in range(steps):
            frames, keypoints = torch.randn(8, 16, generator=gen), torch.randn(8, 4, generator=gen)
            loss = nn.functional.mse_loss(self.model(frames), keypoints)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            if self.writer is not None:
                self.writer.log(step, {"loss": round(loss.item(), 5)})


def run(rank, world_size, port, cfg):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world_size)
    torch.manual_seed(0)
    trainer = KeypointTrainer(DistributedDataParallel(nn.Linear(16, 4)), make_writer(cfg, rank))
    trainer.fit(torch.Generator().manual_seed(rank), steps=4)
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = {"run_dir": tempfile.mkdtemp()}
    mp.spawn(run, args=(2, port, cfg), nprocs=2)
    with open(os.path.join(cfg["run_dir"], "metrics.csv")) as fh:
        print(sum(1 for _ in fh), "rows")
