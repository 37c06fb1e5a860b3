# Modelled on the GitHub issue "Identical random transforms across DataLoader workers"
# (https://github.com/TorchDSP/torchsig/issues/343): a signal dataset inherits its random
# generator from a base class that builds it in __init__; every DataLoader worker gets a copy
# of the same torch.Generator and adds the same noise to its batches.
import torch
from torch.utils.data import DataLoader, Dataset


class SeededSource(Dataset):
    def __init__(self, seed):
        self.gen = torch.Generator().manual_seed(seed)  # expect: TG503


class NoisySignals(SeededSource):
    def __init__(self, n, seed=0):
        super().__init__(seed)
        self.clean = torch.sin(torch.linspace(0, 6.28, 32)).repeat(n, 1)

    def __len__(self):
        return len(self.clean)

    def __getitem__(self, i):
        return self.clean[i] + 0.1 * torch.randn(32, generator=self.gen)


if __name__ == "__main__":
    loader = DataLoader(NoisySignals(8), batch_size=2, num_workers=2)
    batches = [b for b in loader]
    print(torch.allclose(batches[0] - batches[1], torch.zeros(2, 32)))
