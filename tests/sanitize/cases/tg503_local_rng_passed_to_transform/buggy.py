# Report: https://github.com/TorchDSP/torchsig/issues/343
# Modelled on TorchDSP/torchsig#343 ("Transforms generate same random numbers in different
# workers"): a token-sequence dataset makes a seeded random.Random in a local of its __init__
# and passes it to the word-dropout transform it builds; the transform only keeps it. Every
# DataLoader worker gets a copy with the same state, so the dropped positions repeat. The
# line that makes the generator is the one to change, not the transform's store that keeps it.
import random

import torch
from torch.utils.data import DataLoader, Dataset


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
        source = random.Random(seed)  # expect: TG503
        self.dropout = WordDropout(0.2, source)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return torch.tensor(self.dropout(self.rows[i]))


if __name__ == "__main__":
    loader = DataLoader(Sentences(8), batch_size=2, num_workers=2)
    print(sum(int((b == 0).sum()) for b in loader))
