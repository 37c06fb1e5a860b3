# Modelled on pytorch/pytorch#5059 (https://github.com/pytorch/pytorch/issues/5059): numpy random
# numbers repeat across DataLoader workers. Here an ECG-window dataset makes one seeded numpy
# Generator in its __init__ and hands it to the jitter transform, which only keeps it; every worker
# gets a copy with the same state. The line that makes the generator is the one to change, not
# the transform's assignment that keeps it.
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
        self.rng = np.random.default_rng(seed)  # expect: TG503
        self.augment = Jitter(self.rng, scale=0.05)

    def __len__(self):
        return len(self.signal)

    def __getitem__(self, i):
        return torch.as_tensor(self.augment(self.signal[i]), dtype=torch.float32)


if __name__ == "__main__":
    loader = DataLoader(Windows(8), batch_size=2, num_workers=2)
    batches = [b for b in loader]
    print(len(batches))
