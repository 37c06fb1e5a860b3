# Modelled on Project-MONAI/MONAI#1068 "Random transforms generates the same random repeatly"
# (https://github.com/Project-MONAI/MONAI/issues/1068): each random transform derives from a
# Randomizable base whose __init__ makes its own np.random.RandomState; the transforms sit in a
# Compose held by the dataset. The worker_init_fn only reseeds numpy's global generator, which the
# transforms never use, so every DataLoader worker copies the same RandomState and the "random"
# values repeat across workers. Fixed twin: the worker_init_fn reseeds the transforms' own states.
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class Randomizable:
    def __init__(self, seed=0):
        self.R = np.random.RandomState(seed)  # expect: TG503

    def set_random_state(self, seed):
        self.R = np.random.RandomState(seed)
        return self


class RandScaleIntensity(Randomizable):
    def __init__(self, factors=0.1):
        super().__init__()
        self.factors = factors

    def __call__(self, img):
        scale = 1.0 + self.R.uniform(-self.factors, self.factors)
        return img * scale


class Compose:
    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class Volumes(Dataset):
    def __init__(self, n, transform):
        self.data = np.ones((n, 8), dtype=np.float32)
        self.transform = transform

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return torch.from_numpy(self.transform(self.data[i]))


def wif(worker_id):
    np.random.seed(np.random.randint(0, 2**31 - 1) + worker_id)


if __name__ == "__main__":
    torch.manual_seed(0)
    ds = Volumes(12, transform=Compose([RandScaleIntensity(0.2)]))
    loader = DataLoader(ds, batch_size=3, num_workers=2, worker_init_fn=wif)
    for epoch in range(2):
        for batch in loader:
            print(epoch, batch[:, 0].tolist())
