# Report: https://github.com/TorchDSP/torchsig/issues/343
# Fixed twin: a worker_init_fn gives each worker's copy of the transform its own generator.
import random

import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info


class WordDropout:
    def __init__(self, p, source):
        self.p = p
        self.source = source

    def __call__(self, ids):
        kept = list(ids)
        for k in range(len(kept)):
            if self.source.random() < self.p:
                kept[k] = 0
        return kept


class Sentences(Dataset):
    def __init__(self, n, length=12, seed=3):
        self.rows = [[(7 * i + j) % 50 + 1 for j in range(length)] for i in range(n)]
        source = random.Random(seed)
        self.dropout = WordDropout(0.2, source)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return torch.tensor(self.dropout(self.rows[i]))


def reseed(worker_id):
    info = get_worker_info()
    info.dataset.dropout.source = random.Random(info.seed)


if __name__ == "__main__":
    loader = DataLoader(Sentences(8), batch_size=2, num_workers=2, worker_init_fn=reseed)
    print(sum(int((b == 0).sum()) for b in loader))
