# Modelled on GitHub milesial/Pytorch-UNet#78 (https://github.com/milesial/Pytorch-UNet/issues/78):
# binary masks read as 0/255 images go to a binary cross-entropy unscaled, so the loss turns
# negative and grows without bound; the fix is to load the masks as 0/1. Here, functions and a
# dataset that returns a dict sample; the loop reads batch["mask"].
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(1)


class BlobDataset(Dataset):
    def __init__(self, n=24, size=16):
        rng = np.random.default_rng(0)
        self.images = rng.normal(size=(n, 1, size, size)).astype(np.float32)
        self.masks = np.where(self.images[:, 0] > 0.5, 255, 0).astype(np.uint8)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        image = torch.from_numpy(self.images[i])
        mask = torch.from_numpy(self.masks[i]).float().unsqueeze(0)  # expect: TG402
        return {"image": image, "mask": mask}


def make_model():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 1))


def train(model, loader, epochs=2):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(epochs):
        for batch in loader:
            logits = model(batch["image"])
            loss = F.binary_cross_entropy_with_logits(logits, batch["mask"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


train(make_model(), DataLoader(BlobDataset(), batch_size=8, shuffle=True))
