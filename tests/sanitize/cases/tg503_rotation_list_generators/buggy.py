# Modelled on Project-MONAI/MONAI#398 "DataLoader with num_workers > 1, and a Rand[Zoom/Rotate/Flip]d
# transforms" (https://github.com/Project-MONAI/MONAI/issues/398): "the number of replicated
# rotation values is always equal to the num_workers specified". Here the dataset keeps a plain
# list of augmenters, each drawing from a torch.Generator it seeded in __init__; no worker reseeds
# them. Fixed twin: each augmenter makes its generator inside the worker, on first use after a
# worker-id check, seeded from torch.initial_seed() (which differs per worker).
import math

import torch
from torch.utils.data import DataLoader, Dataset


class RandRotate:
    def __init__(self, max_degrees, seed=1234):
        self.max_degrees = max_degrees
        self.gen = torch.Generator().manual_seed(seed)  # expect: TG503

    def __call__(self, points):
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
