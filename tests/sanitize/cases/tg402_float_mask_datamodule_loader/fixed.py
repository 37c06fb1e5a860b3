# Fixed twin of buggy.py (https://github.com/torchgeo/terratorch/pull/644): the masks stay int64
# class indices.
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)


class TileDataset(Dataset):
    def __init__(self, n=16, size=8, classes=4):
        rng = np.random.default_rng(0)
        self.images = rng.normal(size=(n, 3, size, size)).astype(np.float32)
        self.masks = rng.integers(0, classes, size=(n, size, size))

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        image = torch.from_numpy(self.images[i])
        mask = torch.from_numpy(self.masks[i]).long()
        return {"image": image, "mask": mask}


class DataModule:
    def __init__(self):
        self.train_ds = TileDataset()

    def train_dataloader(self):
        return DataLoader(self.train_ds, batch_size=4, shuffle=True)


class SegTask:
    def __init__(self):
        self.model = nn.Conv2d(3, 4, 1)
        self.criterion = nn.CrossEntropyLoss()

    def training_step(self, batch):
        return self.criterion(self.model(batch["image"]), batch["mask"])


task, dm = SegTask(), DataModule()
optimizer = torch.optim.SGD(task.model.parameters(), lr=0.1)
for epoch in range(2):
    for batch in dm.train_dataloader():
        loss = task.training_step(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
