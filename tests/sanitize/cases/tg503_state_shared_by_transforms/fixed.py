# Modelled on Project-MONAI/MONAI#398 "the number of replicated rotation values is always equal
# to the num_workers specified" (https://github.com/Project-MONAI/MONAI/issues/398): a dataset
# makes one seeded generator and hands that same object to each of its random transforms
# (SpecAugment-style time and frequency masks here). DataLoader workers each get a copy of the
# dataset with the generator in one state, so every worker masks the same bands in the same
# order. The cause is the dataset's line that makes the shared generator, not the transforms'
# lines that keep a reference to it. The worker_init_fn reseeds only Python's global `random`.
# Fixed twin: the worker_init_fn reseeds the shared generator in place, which every transform sees.
import random

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class TimeMask:
    def __init__(self, rng, width=4):
        self.rng = rng
        self.width = width

    def __call__(self, spec):
        t0 = self.rng.randrange(0, spec.shape[1] - self.width)
        spec = spec.clone()
        spec[:, t0:t0 + self.width] = 0.0
        return spec


class FreqMask:
    def __init__(self, rng, width=3):
        self.rng = rng
        self.width = width

    def __call__(self, spec):
        f0 = self.rng.randrange(0, spec.shape[0] - self.width)
        spec = spec.clone()
        spec[f0:f0 + self.width, :] = 0.0
        return spec


class Spectrograms(Dataset):
    def __init__(self, n, seed=11):
        g = torch.Generator().manual_seed(0)
        self.specs = torch.randn(n, 20, 32, generator=g)
        self.labels = torch.randint(0, 3, (n,), generator=g)
        self.rs = random.Random(seed)
        self.augment = [TimeMask(self.rs), FreqMask(self.rs)]

    def __len__(self):
        return len(self.specs)

    def __getitem__(self, i):
        spec = self.specs[i]
        for t in self.augment:
            spec = t(spec)
        return spec, self.labels[i]


def seed_python(worker_id):
    random.seed(torch.initial_seed() % 2**32)
    info = torch.utils.data.get_worker_info()
    info.dataset.rs.seed(info.seed)


class Trainer:
    def __init__(self):
        self.model = nn.Sequential(nn.Flatten(), nn.Linear(20 * 32, 3))
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.loader = DataLoader(Spectrograms(16), batch_size=4, shuffle=True, num_workers=2,
                                 worker_init_fn=seed_python)

    def fit(self, epochs=2):
        for _ in range(epochs):
            for spec, y in self.loader:
                loss = nn.functional.cross_entropy(self.model(spec), y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
        return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    print(Trainer().fit())
