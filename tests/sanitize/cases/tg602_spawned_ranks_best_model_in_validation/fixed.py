# Fixed twin of buggy.py (https://github.com/NVIDIA/apex/issues/118): validate() saves the best
# model on rank 0 only.
import os
import socket
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def save_best(model, folder):
    torch.save(model.state_dict(), os.path.join(folder, "best.pt"))


class Trainer:
    def __init__(self, rank, folder):
        self.rank, self.folder, self.best = rank, folder, float("inf")
        self.model = DistributedDataParallel(nn.Linear(6, 1))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05)
        self.gen = torch.Generator().manual_seed(rank)

    def train_epoch(self):
        for _ in range(3):
            x = torch.randn(8, 6, generator=self.gen)
            loss = nn.functional.mse_loss(self.model(x), x.sum(1, keepdim=True))
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

    def validate(self):
        with torch.no_grad():
            x = torch.randn(16, 6, generator=self.gen)
            error = nn.functional.mse_loss(self.model(x), x.sum(1, keepdim=True)).item()
        if error < self.best:
            self.best = error
            if self.rank == 0:
                save_best(self.model.module, self.folder)


def worker(rank, world_size, port, folder):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world_size)
    torch.manual_seed(0)
    trainer = Trainer(rank, folder)
    for epoch in range(2):
        trainer.train_epoch()
        trainer.validate()
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(2, port, tempfile.mkdtemp()), nprocs=2)
