# Fixed twin of kakaobrain/scrl#5 (https://github.com/kakaobrain/scrl/issues/5): the checkpoint is
# written by rank 0 only, as the maintainers suggested ("if comm.is_main_process():"); the other
# rank waits at a barrier so that nobody reads a half-written file.
import os
import socket
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel


class Trainer:
    def __init__(self, rank, world_size, save_dir):
        self.rank, self.save_dir = rank, save_dir
        torch.manual_seed(0)
        self.model = DistributedDataParallel(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2)))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05)
        self.best = float("inf")
        gen = torch.Generator().manual_seed(rank)
        self.batches = [(torch.randn(8, 6, generator=gen), torch.randint(0, 2, (8,), generator=gen))
                        for _ in range(4)]
        self.val_batch = (torch.randn(16, 6, generator=gen), torch.randint(0, 2, (16,), generator=gen))

    def _save_checkpoint(self, tag):
        if dist.get_rank() != 0:
            return
        save_path = f"{self.save_dir}/checkpoint_{tag}.pth"
        state = {"tag": tag, "model": self.model.module.state_dict(),
                 "optimizer": self.optimizer.state_dict()}
        torch.save(state, save_path)

    def run(self, epochs):
        for epoch in range(epochs):
            for x, y in self.batches:
                loss = nn.functional.cross_entropy(self.model(x), y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            with torch.no_grad():
                val_loss = nn.functional.cross_entropy(self.model(self.val_batch[0]),
                                                       self.val_batch[1]).item()
            if val_loss < self.best:
                self.best = val_loss
                self._save_checkpoint("best")
            dist.barrier()


def main_worker(rank, world_size, port, save_dir):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world_size)
    Trainer(rank, world_size, save_dir).run(epochs=2)
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    save_dir = tempfile.mkdtemp()
    mp.spawn(main_worker, args=(2, port, save_dir), nprocs=2)
    print(sorted(os.listdir(save_dir)))
