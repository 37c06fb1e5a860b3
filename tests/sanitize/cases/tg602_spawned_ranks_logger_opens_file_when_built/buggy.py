# Modelled on mmmwhy/pure_attention#68 (https://github.com/mmmwhy/pure_attention/pull/68, "logger
# when rank == 0, or no ddp"): each DDP process builds the run's logger, which opens its log file
# as it is built, before training starts, so every rank appends the same lines to one file. The
# rank check belongs where the trainer builds it. The script starts its own ranks with
# torch.multiprocessing.
import json
import os
import socket
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel


class JsonLinesLogger:
    def __init__(self, path):
        self.stream = open(path, "a")

    def log(self, **fields):
        self.stream.write(json.dumps(fields) + "\n")
        self.stream.flush()

    def close(self):
        self.stream.close()


class Trainer:
    def __init__(self, rank, log_dir):
        self.rank = rank
        self.logger = JsonLinesLogger(os.path.join(log_dir, "train.jsonl"))  # expect: TG602
        self.classifier = DistributedDataParallel(nn.Sequential(nn.Linear(20, 16), nn.ReLU(),
                                                                nn.Linear(16, 3)))
        self.optimizer = torch.optim.AdamW(self.classifier.parameters(), lr=1e-3)

    def fit(self, steps):
        gen = torch.Generator().manual_seed(self.rank)
        for step in range(steps):
            tokens = torch.randn(8, 20, generator=gen)
            labels = torch.randint(0, 3, (8,), generator=gen)
            loss = nn.functional.cross_entropy(self.classifier(tokens), labels)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            if self.logger is not None:
                self.logger.log(step=step, loss=round(loss.item(), 4))
        if self.logger is not None:
            self.logger.close()


def train(rank, world_size, port, log_dir):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world_size)
    torch.manual_seed(0)
    Trainer(rank, log_dir).fit(steps=4)
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log_dir = tempfile.mkdtemp()
    mp.spawn(train, args=(2, port, log_dir), nprocs=2)
    with open(os.path.join(log_dir, "train.jsonl")) as fh:
        print(sum(1 for _ in fh), "log lines")
