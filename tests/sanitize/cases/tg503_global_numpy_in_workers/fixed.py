# Near miss for TG503 (and TG501): __getitem__ draws from numpy's global generator in DataLoader
# workers. Since PyTorch 1.9 every worker seeds it from base_seed + worker_id
# (pytorch/pytorch#56488, https://github.com/pytorch/pytorch/pull/56488;
# torch/utils/data/_utils/worker.py), and base_seed comes from torch's seeded generator, so the
# workers differ and the run repeats. The main process never draws from numpy.
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class RandomCrops(Dataset):
    def __init__(self, images):
        self.images = images

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        top = np.random.randint(0, 4)
        return torch.as_tensor(self.images[index, top:top + 4])


if __name__ == "__main__":
    torch.manual_seed(0)
    loader = DataLoader(RandomCrops(np.zeros((8, 8), dtype=np.float32)), batch_size=4,
                        num_workers=2, shuffle=True)
    for batch in loader:
        print(tuple(batch.shape))
