# Deterministic per-item augmentation: each dataset reseeds its own generator from the item index
# in __getitem__ (torch.Generator.manual_seed, https://pytorch.org/docs/stable/generated/torch.Generator.html#torch.Generator.manual_seed;
# RandomState.seed; a numpy Generator's bit_generator.state), so an item's draws depend on the item
# alone, whatever worker loads it ("Randomness in multi-process data loading",
# https://pytorch.org/docs/stable/data.html#randomness-in-multi-process-data-loading). TG503 stays
# silent.
import random

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class JitterTorch(Dataset):
    def __init__(self):
        self.g = torch.Generator()
        self.x = torch.randn(8, 2)

    def __len__(self):
        return 8

    def __getitem__(self, i):
        self.g.manual_seed(i)
        return self.x[i] + torch.rand(2, generator=self.g)


class JitterRandomState(Dataset):
    def __init__(self, seed=1000):
        self.seed = seed
        self.rs = np.random.RandomState()
        self.x = torch.randn(8, 2)

    def __len__(self):
        return 8

    def __getitem__(self, i):
        self.rs.seed(self.seed + i)
        return self.x[i] + float(self.rs.uniform())


class JitterState(Dataset):
    def __init__(self):
        self.rng = np.random.default_rng(0)
        self.states = [np.random.default_rng(i).bit_generator.state for i in range(8)]
        self.random = random.Random(0)
        self.random_states = [random.Random(i).getstate() for i in range(8)]
        self.x = torch.randn(8, 2)

    def __len__(self):
        return 8

    def __getitem__(self, i):
        self.rng.bit_generator.state = self.states[i]
        self.random.setstate(self.random_states[i])
        return self.x[i] + float(self.rng.normal()) + self.random.random()


if __name__ == "__main__":
    torch.manual_seed(0)
    for dataset in (JitterTorch(), JitterRandomState(), JitterState()):
        for batch in DataLoader(dataset, batch_size=4, num_workers=2):
            assert batch.shape == (4, 2)
