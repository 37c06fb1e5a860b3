# Modelled on Project-MONAI/MONAI#1068 (https://github.com/Project-MONAI/MONAI/issues/1068):
# randomizable transforms seeded once with set_random_state() draw the same numbers in every
# DataLoader worker. Here a spectrogram dataset builds its time-masking transform and seeds it
# through a mixin's setter; the generator is made by the setter, but the dataset's line that
# builds and seeds the transform is the one to change.
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
        self.mask = TimeMask(6).set_random_state(seed)  # expect: TG503

    def __len__(self):
        return len(self.specs)

    def __getitem__(self, i):
        return torch.from_numpy(self.mask(self.specs[i]))


if __name__ == "__main__":
    loader = DataLoader(Spectrograms(8), batch_size=2, num_workers=2)
    batches = [b for b in loader]
    print(len(batches))
