# Modelled on facebookresearch/pytext#212 "save/load model only for rank==0"
# (https://github.com/facebookresearch/pytext/pull/212): "Save/load can break for distributed
# training with multiple processes writing to the same file". Here the ranks are started with
# torch.multiprocessing.start_processes (forkserver), and a snapshot helper called at the end of every
# epoch writes the same file from both ranks. Fixed twin: only the master process writes it.
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def build_model():
    return nn.GRU(input_size=4, hidden_size=8, batch_first=True)


def save_snapshot(model, optimizer, epoch, path):
    state = {"epoch": epoch, "model": model.module.state_dict(), "optim": optimizer.state_dict()}
    torch.save(state, path)


def train(local_rank, world_size, init_file, out_dir):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=local_rank,
                            world_size=world_size)
    torch.manual_seed(0)
    model = DDP(build_model())
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    sequences = torch.randn(6, 5, 4)
    for epoch in range(2):
        for seq in sequences.split(2):
            output, _ = model(seq)
            loss = output[:, -1].pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        save_snapshot(model, optimizer, epoch, Path(out_dir) / "snapshot.pt")  # expect: TG602
    dist.destroy_process_group()


if __name__ == "__main__":
    out_dir = tempfile.mkdtemp()
    mp.start_processes(train, args=(2, Path(out_dir) / "rendezvous", out_dir), nprocs=2,
                       start_method="forkserver")
    print(torch.load(Path(out_dir) / "snapshot.pt")["epoch"])
