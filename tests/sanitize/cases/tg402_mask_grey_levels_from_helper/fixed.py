# Fixed twin of buggy.py (https://github.com/milesial/Pytorch-UNet/issues/291): the mask's grey
# levels become class indices 0 and 1 where the mask is read.
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(5)


def to_array(picture, is_mask=False, scale=1.0):
    if is_mask:
        return (np.asarray(picture) > 127).astype(np.int64)
    picture = np.asarray(picture, dtype=np.float32) * scale
    return picture[None] / 255.0


class CarvanaLike(Dataset):
    def __init__(self, n=16, size=12):
        rng = np.random.default_rng(0)
        self.pictures = rng.integers(0, 256, size=(n, size, size))
        self.masks = np.where(self.pictures > 128, 255, 0)

    def __len__(self):
        return len(self.pictures)

    def __getitem__(self, idx):
        image = torch.as_tensor(to_array(self.pictures[idx]))
        mask = torch.as_tensor(to_array(self.masks[idx], is_mask=True))
        return {"image": image, "mask": mask}


def train_net(net, loader, epochs=1):
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.RMSprop(net.parameters(), lr=1e-4)
    for _ in range(epochs):
        for batch in loader:
            images, true_masks = batch["image"], batch["mask"]
            masks_pred = net(images)
            loss = criterion(masks_pred, true_masks)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return loss.item()


net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 2, 1))
print(f"loss {train_net(net, DataLoader(CarvanaLike(), batch_size=4, shuffle=True)):.3f}")
