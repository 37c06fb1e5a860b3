# Fixed twin of TorchDSP/torchsig#343 (https://github.com/TorchDSP/torchsig/issues/343): the
# dataset draws from the global random module; PyTorch seeds it in every worker with
# base_seed + worker_id (torch/utils/data/_utils/worker.py), and seed_worker from the
# reproducibility notes (https://pytorch.org/docs/stable/notes/randomness.html#dataloader) keeps it
# reproducible.
import random

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class NoisySignals(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        return torch.tensor([float(index), random.gauss(0.0, 1.0)])


def seed_worker(worker_id):
    worker_seed = torch.initial_seed() % 2**32
    np.random.seed(worker_seed)
    random.seed(worker_seed)


def main():
    torch.manual_seed(0)
    loader = DataLoader(NoisySignals(8), batch_size=2, num_workers=2, worker_init_fn=seed_worker)
    noise = [batch[:, 1] for batch in loader]
    print(torch.stack(noise))


if __name__ == "__main__":
    main()
