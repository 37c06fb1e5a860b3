# Modelled on wolny/pytorch-3dunet#32 "np.random generates the same random numbers for each data
# batch" (https://github.com/wolny/pytorch-3dunet/issues/32): the dataset builds a seeded
# RandomState in __init__ for its random flips and contrast, and "the workers share the common
# instance of the Dataset which was initialized with a fixed seed", so every worker applies the
# same augmentations. Fixed twin: a worker_init_fn gives each worker its own RandomState.
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class Patches(Dataset):
    def __init__(self, volumes, seed=47):
        self.volumes = volumes
        self.random_state = np.random.RandomState(seed)  # expect: TG503

    def __len__(self):
        return len(self.volumes)

    def _augment(self, patch):
        if self.random_state.uniform() < 0.5:
            patch = patch[::-1]
        return patch * self.random_state.uniform(0.8, 1.2)

    def __getitem__(self, index):
        return torch.as_tensor(self._augment(self.volumes[index]).copy(), dtype=torch.float32)


if __name__ == "__main__":
    torch.manual_seed(0)
    loader = DataLoader(Patches(np.ones((16, 4))), batch_size=4, num_workers=2)
    for epoch in range(2):
        for batch in loader:
            scale = batch[:, 0]
    print(f"last scales {scale.tolist()}")
