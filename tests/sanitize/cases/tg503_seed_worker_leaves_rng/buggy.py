# Modelled on TorchDSP/torchsig#343 "Transforms generate same random numbers in different workers"
# (https://github.com/TorchDSP/torchsig/issues/343): a generator object made once (here a
# random.Random on the dataset) gives each worker the same sequence. The DataLoader has the
# worker_init_fn from PyTorch's reproducibility notes
# (https://pytorch.org/docs/stable/notes/randomness.html#dataloader), but it reseeds only the
# global numpy and random generators, not the dataset's own object.
# Fixed twin: draw from the global random module, which PyTorch reseeds in every worker.
import random

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class NoisySignals(Dataset):
    def __init__(self, n):
        self.n = n
        self.rng = random.Random(1234)  # expect: TG503

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        return torch.tensor([float(index), self.rng.gauss(0.0, 1.0)])


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
