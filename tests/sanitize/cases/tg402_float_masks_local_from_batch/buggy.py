# Modelled on GitHub qubvel-org/segmentation_models.pytorch#466
# (https://github.com/qubvel-org/segmentation_models.pytorch/issues/466): a multi-class
# segmentation adapted from a binary example keeps its masks as floats, and CrossEntropyLoss
# stops at the first batch ("expected scalar type Long but found Float"). Here an epoch runner
# class takes the masks out of each dict batch into a local before the loss; the cause is the
# line in __getitem__.
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(7)


class CamVidLike(Dataset):
    def __init__(self, n=12, size=16, classes=3):
        rng = np.random.default_rng(1)
        self.images = rng.random((n, 3, size, size)).astype(np.float32)
        self.labels = rng.integers(0, classes, size=(n, size, size))

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        image = torch.from_numpy(self.images[i])
        mask = torch.from_numpy(self.labels[i].astype(np.float32))  # expect: TG402
        return {"image": image, "mask": mask}


class TrainEpoch:
    def __init__(self, model, loss, optimizer):
        self.model, self.loss, self.optimizer = model, loss, optimizer

    def batch_update(self, x, y):
        self.optimizer.zero_grad()
        prediction = self.model(x)
        loss = self.loss(prediction, y)
        loss.backward()
        self.optimizer.step()
        return loss

    def run(self, loader):
        total = 0.0
        for batch in loader:
            x = batch["image"]
            y = batch["mask"]
            total += self.batch_update(x, y).item()
        return total / len(loader)


model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 1))
runner = TrainEpoch(model, nn.CrossEntropyLoss(), torch.optim.Adam(model.parameters(), lr=1e-3))
print(f"loss {runner.run(DataLoader(CamVidLike(), batch_size=4, shuffle=True)):.3f}")
