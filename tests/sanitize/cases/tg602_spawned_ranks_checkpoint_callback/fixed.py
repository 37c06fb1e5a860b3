# Modelled on https://github.com/neuraloperator/neuraloperator/pull/324
# (a checkpoint callback of a DDP trainer wrote on every rank): the trainer dispatches
# on_epoch_end to each of its callbacks on every rank, and the checkpoint callback returns on
# every rank but 0, so one process writes the file.
import os
import socket
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel


class CheckpointCallback:
    def __init__(self, save_dir):
        self.save_dir = save_dir

    def on_epoch_end(self, trainer, epoch):
        if trainer.rank != 0:
            return
        state = {"model": trainer.model.module.state_dict(),
                 "optimizer": trainer.optimizer.state_dict(), "epoch": epoch}
        torch.save(state, os.path.join(self.save_dir, "state.pt"))


class Trainer:
    def __init__(self, rank, callbacks):
        self.rank, self.callbacks = rank, callbacks
        torch.manual_seed(0)
        self.model = DistributedDataParallel(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2)))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05)
        gen = torch.Generator().manual_seed(rank)
        self.batches = [(torch.randn(8, 6, generator=gen), torch.randint(0, 2, (8,), generator=gen))
                        for _ in range(4)]

    def fit(self, epochs):
        for epoch in range(epochs):
            for x, y in self.batches:
                loss = nn.functional.cross_entropy(self.model(x), y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            for cb in self.callbacks:
                cb.on_epoch_end(self, epoch)


def main_worker(rank, world_size, port, save_dir):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world_size)
    Trainer(rank, [CheckpointCallback(save_dir)]).fit(epochs=2)
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    save_dir = tempfile.mkdtemp()
    mp.spawn(main_worker, args=(2, port, save_dir), nprocs=2)
    print(sorted(os.listdir(save_dir)))
