# Modelled on k2-fsa/icefall#221 (https://github.com/k2-fsa/icefall/pull/221), where a reviewer
# notes that "we may want to ensure that rng used for data augmentation in dataloading workers is
# seeded differently per worker, otherwise it might be applying the same augmentations". The
# augmentation below does reseed its generator from the worker's seed, but only when it was
# built with a seed; built without one, as here, every worker keeps the copy of the generator
# made in __init__ and draws the same perturbations.
import random

import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info


class SpeedPerturb:
    def __init__(self, factors=(0.9, 1.0, 1.1), seed=None):
        self.factors = factors
        self.seed = seed
        self.rng = random.Random(seed)
        self.worker = None

    def _sync_worker(self):
        info = get_worker_info()
        if info is None or self.worker == info.id:
            return
        self.worker = info.id
        self.rng = random.Random(info.seed)

    def __call__(self, wave):
        self._sync_worker()
        return wave * self.rng.choice(self.factors)


class Utterances(Dataset):
    def __init__(self, n=32):
        self.waves = torch.randn(n, 160)
        self.augment = SpeedPerturb()

    def __len__(self):
        return len(self.waves)

    def __getitem__(self, i):
        return self.augment(self.waves[i])


if __name__ == "__main__":
    torch.manual_seed(0)
    loader = DataLoader(Utterances(), batch_size=4, num_workers=2)
    model = torch.nn.Linear(160, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for batch in loader:
        loss = model(batch).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
