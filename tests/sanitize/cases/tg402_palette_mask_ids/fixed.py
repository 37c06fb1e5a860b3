# Report: https://github.com/Nota-NetsPresso/netspresso-trainer/issues/150
# Modelled on Nota-NetsPresso/netspresso-trainer#150 ("'target' of semantic segmentation loader
# doesn't match with class number"): the masks hold the label image's pixel intensities (0, 147,
# 151, 220), one per class, and the dataset returns them without converting them to class
# indices, so cross_entropy raises "Target 220 is out of bounds" for the 4-class model. The
# finding is where the dataset makes the mask. Fixed twin: a lookup table maps the intensities.
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

INTENSITIES = (0, 147, 151, 220)  # background, then one grey level per labelled class


class LabelImageDataset(Dataset):
    def __init__(self, n: int = 12, size: int = 24) -> None:
        rng = np.random.default_rng(0)
        self.images = rng.normal(size=(n, 3, size, size)).astype(np.float32)
        kinds = rng.integers(0, len(INTENSITIES), size=(n, size // 4, size // 4))
        self.labels = np.asarray(INTENSITIES, np.uint8)[kinds].repeat(4, 1).repeat(4, 2)

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int):
        to_class = np.zeros(256, np.int64)
        to_class[list(INTENSITIES)] = np.arange(len(INTENSITIES))
        mask = torch.from_numpy(to_class[self.labels[i]])
        return torch.from_numpy(self.images[i]), mask


model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 4, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
torch.manual_seed(0)
loader = DataLoader(LabelImageDataset(), batch_size=4, shuffle=True)
for images, masks in loader:
    loss = F.cross_entropy(model(images), masks, ignore_index=255)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.4f}")
