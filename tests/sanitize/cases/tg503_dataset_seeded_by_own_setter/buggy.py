# Modelled on Project-MONAI/MONAI#1068 (https://github.com/Project-MONAI/MONAI/issues/1068):
# randomizable objects seeded once with set_random_state() draw the same numbers in every
# DataLoader worker. Here the dataset itself mixes in the setter and seeds itself in __init__;
# the generator is made inside the setter, but the dataset's call of it is the line to change.
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class Randomizable:
    R = np.random.RandomState()

    def set_random_state(self, seed=None):
        self.R = np.random.RandomState(seed)
        return self


class PatchDataset(Dataset, Randomizable):
    def __init__(self, images, patch=4, seed=0):
        self.images, self.patch = images, patch
        self.set_random_state(seed)  # expect: TG503

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        top = self.R.randint(0, self.images.shape[-1] - self.patch + 1)
        return self.images[i, :, top:top + self.patch], torch.tensor(top)


if __name__ == "__main__":
    data = PatchDataset(torch.randn(16, 1, 12))
    loader = DataLoader(data, batch_size=4, num_workers=2)
    starts = [tops.tolist() for _, tops in loader]
    print(starts)
