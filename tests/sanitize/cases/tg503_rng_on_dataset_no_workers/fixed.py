# Near miss for TG503: a generator object on the dataset is fine when the DataLoader loads in the
# main process (num_workers=0): there is one copy, drawn from in sequence. "Randomness in
# multi-process data loading" (https://pytorch.org/docs/stable/data.html#randomness-in-multi-process-data-loading)
# concerns worker processes only.
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class Jitter(Dataset):
    def __init__(self, n, seed=0):
        self.n = n
        self.rng = np.random.default_rng(seed)

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        return torch.tensor([index + self.rng.normal()], dtype=torch.float32)


torch.manual_seed(0)
loader = DataLoader(Jitter(8), batch_size=4)
for epoch in range(2):
    for batch in loader:
        print(batch.squeeze(1).tolist())
