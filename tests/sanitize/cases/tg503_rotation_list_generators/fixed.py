# Fixed twin of Project-MONAI/MONAI#398 (https://github.com/Project-MONAI/MONAI/issues/398): each
# augmenter makes its torch.Generator in the worker that uses it, on first use after a worker-id
# check, seeded from torch.initial_seed(), which PyTorch makes different in every worker.
import math

import torch
from torch.utils.data import DataLoader, Dataset


class RandRotate:
    def __init__(self, max_degrees, seed=1234):
        self.max_degrees = max_degrees
        self.gen = None
        self.worker = None

    def _generator(self):
        info = torch.utils.data.get_worker_info()
        worker = None if info is None else info.id
        if self.gen is None or self.worker != worker:
            self.gen = torch.Generator().manual_seed(torch.initial_seed() % 2**63)
            self.worker = worker
        return self.gen

    def __call__(self, points):
        self.gen = self._generator()
        angle = math.radians((torch.rand(1, generator=self.gen).item() * 2 - 1) * self.max_degrees)
        c, s = math.cos(angle), math.sin(angle)
        return points @ torch.tensor([[c, -s], [s, c]])


class RandFlip:
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, points):
        return points.flip(0) if torch.rand(1).item() < self.p else points


class PointClouds(Dataset):
    def __init__(self, clouds):
        self.clouds = clouds
        self.augmenters = [RandRotate(30.0), RandFlip()]

    def __len__(self):
        return len(self.clouds)

    def __getitem__(self, i):
        points = self.clouds[i]
        for aug in self.augmenters:
            points = aug(points)
        return points


def train():
    torch.manual_seed(0)
    loader = DataLoader(PointClouds(torch.randn(16, 5, 2)), batch_size=4, num_workers=2)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for points in loader:
        loss = model(points).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


if __name__ == "__main__":
    print(train())
