# Fixed twin of buggy.py (https://github.com/Project-MONAI/MONAI/issues/1068): each worker
# reseeds the dataset's generator from its own torch seed in a worker_init_fn.
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
        self.set_random_state(seed)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        top = self.R.randint(0, self.images.shape[-1] - self.patch + 1)
        return self.images[i, :, top:top + self.patch], torch.tensor(top)


if __name__ == "__main__":
    data = PatchDataset(torch.randn(16, 1, 12))
    loader = DataLoader(data, batch_size=4, num_workers=2, worker_init_fn=lambda _: (
        torch.utils.data.get_worker_info().dataset.set_random_state(torch.initial_seed() % 2**32)))
    starts = [tops.tolist() for _, tops in loader]
    print(starts)
