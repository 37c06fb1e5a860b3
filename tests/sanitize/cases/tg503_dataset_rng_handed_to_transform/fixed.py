# Fixed twin of buggy.py (https://github.com/pytorch/pytorch/issues/5059): a worker_init_fn gives
# each worker its own generator, set on both the dataset and the transform it was handed to.
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class Jitter:
    def __init__(self, rng, scale):
        self.rng, self.scale = rng, scale

    def __call__(self, window):
        return window + self.scale * self.rng.standard_normal(window.shape)


class Windows(Dataset):
    def __init__(self, n, seed=7):
        self.signal = np.sin(np.linspace(0, 20, n * 16)).reshape(n, 16)
        self.rng = np.random.default_rng(seed)
        self.augment = Jitter(self.rng, scale=0.05)

    def __len__(self):
        return len(self.signal)

    def __getitem__(self, i):
        return torch.as_tensor(self.augment(self.signal[i]), dtype=torch.float32)


def seed_worker(worker_id):
    info = torch.utils.data.get_worker_info()
    info.dataset.rng = np.random.default_rng(info.seed % 2**32)
    info.dataset.augment.rng = info.dataset.rng


if __name__ == "__main__":
    loader = DataLoader(Windows(8), batch_size=2, num_workers=2, worker_init_fn=seed_worker)
    batches = [b for b in loader]
    print(len(batches))
