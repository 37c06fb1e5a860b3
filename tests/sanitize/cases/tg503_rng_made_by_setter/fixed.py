# Fixed twin of buggy.py (https://github.com/Project-MONAI/MONAI/issues/1068): a worker_init_fn
# reseeds the transform's generator in each worker from the worker's own seed.
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class Randomizable:
    rng = np.random.RandomState()

    def set_random_state(self, seed=None):
        self.rng = np.random.RandomState(seed)
        return self


class TimeMask(Randomizable):
    def __init__(self, width):
        self.width = width

    def __call__(self, spec):
        start = self.rng.randint(0, spec.shape[1] - self.width + 1)
        out = spec.copy()
        out[:, start:start + self.width] = 0.0
        return out


class Spectrograms(Dataset):
    def __init__(self, n, seed=3):
        self.specs = np.random.default_rng(0).normal(size=(n, 8, 32)).astype(np.float32)
        self.mask = TimeMask(6).set_random_state(seed)

    def __len__(self):
        return len(self.specs)

    def __getitem__(self, i):
        return torch.from_numpy(self.mask(self.specs[i]))


def reseed(worker_id):
    info = torch.utils.data.get_worker_info()
    info.dataset.mask.set_random_state(info.seed % 2**32)


if __name__ == "__main__":
    loader = DataLoader(Spectrograms(8), batch_size=2, num_workers=2, worker_init_fn=reseed)
    batches = [b for b in loader]
    print(len(batches))
