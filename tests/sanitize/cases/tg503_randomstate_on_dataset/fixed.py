# Fixed twin of wolny/pytorch-3dunet#32 (https://github.com/wolny/pytorch-3dunet/issues/32): a
# worker_init_fn replaces the dataset's RandomState in each worker with one seeded from the
# worker's own seed, as "Randomness in multi-process data loading" suggests
# (https://pytorch.org/docs/stable/data.html#randomness-in-multi-process-data-loading).
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info


class Patches(Dataset):
    def __init__(self, volumes, seed=47):
        self.volumes = volumes
        self.random_state = np.random.RandomState(seed)

    def __len__(self):
        return len(self.volumes)

    def _augment(self, patch):
        if self.random_state.uniform() < 0.5:
            patch = patch[::-1]
        return patch * self.random_state.uniform(0.8, 1.2)

    def __getitem__(self, index):
        return torch.as_tensor(self._augment(self.volumes[index]).copy(), dtype=torch.float32)


def reseed_worker(worker_id):
    info = get_worker_info()
    info.dataset.random_state = np.random.RandomState(info.seed % 2**32)


if __name__ == "__main__":
    torch.manual_seed(0)
    loader = DataLoader(Patches(np.ones((16, 4))), batch_size=4, num_workers=2,
                        worker_init_fn=reseed_worker)
    for epoch in range(2):
        for batch in loader:
            scale = batch[:, 0]
    print(f"last scales {scale.tolist()}")
