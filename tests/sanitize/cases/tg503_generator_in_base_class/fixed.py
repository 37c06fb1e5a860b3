# Fixed twin of buggy.py (https://github.com/TorchDSP/torchsig/issues/343): each item draws from a
# generator seeded by the item, so the noise no longer depends on which worker copy draws it.
import torch
from torch.utils.data import DataLoader, Dataset


class SeededSource(Dataset):
    def __init__(self, seed):
        self.seed = seed


class NoisySignals(SeededSource):
    def __init__(self, n, seed=0):
        super().__init__(seed)
        self.clean = torch.sin(torch.linspace(0, 6.28, 32)).repeat(n, 1)

    def __len__(self):
        return len(self.clean)

    def __getitem__(self, i):
        gen = torch.Generator().manual_seed(self.seed * 100003 + i)
        return self.clean[i] + 0.1 * torch.randn(32, generator=gen)


if __name__ == "__main__":
    loader = DataLoader(NoisySignals(8), batch_size=2, num_workers=2)
    batches = [b for b in loader]
    print(torch.allclose(batches[0] - batches[1], torch.zeros(2, 32)))
