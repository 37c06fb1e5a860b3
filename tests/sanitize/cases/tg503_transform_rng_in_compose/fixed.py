# Fixed twin of Project-MONAI/MONAI#1068 (https://github.com/Project-MONAI/MONAI/issues/1068): the
# worker_init_fn gives every transform's own RandomState a seed of its worker, as MONAI's answer
# suggests (set_random_state in each worker), instead of reseeding numpy's global generator.
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class Randomizable:
    def __init__(self, seed=0):
        self.R = np.random.RandomState(seed)

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
    info = torch.utils.data.get_worker_info()
    for t in info.dataset.transform.transforms:
        t.set_random_state(info.seed % 2**32)


if __name__ == "__main__":
    torch.manual_seed(0)
    ds = Volumes(12, transform=Compose([RandScaleIntensity(0.2)]))
    loader = DataLoader(ds, batch_size=3, num_workers=2, worker_init_fn=wif)
    for epoch in range(2):
        for batch in loader:
            print(epoch, batch[:, 0].tolist())
