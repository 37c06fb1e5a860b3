# Fixed twin of buggy.py (https://github.com/xingyizhou/CenterNet/issues/233): the loader's
# worker_init_fn gives every worker a RandomState of its own, seeded from the seed PyTorch gives
# the worker, so the box shifts differ between workers and stay reproducible.
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class BoxJitter:
    """Shifts every box by a few pixels, a different amount per box."""

    def __init__(self, rng, pixels=2.0):
        self.rng = rng
        self.pixels = pixels

    def __call__(self, boxes):
        return np.stack([b + self.rng.uniform(-self.pixels, self.pixels, size=4) for b in boxes])


class Detections(Dataset):
    def __init__(self, n_images=24, boxes_per_image=3):
        source = np.random.default_rng(5)
        self.boxes = source.uniform(0, 64, size=(n_images, boxes_per_image, 4))
        self.jitter = BoxJitter(np.random.RandomState(233))

    def __len__(self):
        return len(self.boxes)

    def __getitem__(self, index):
        return torch.as_tensor(self.jitter(self.boxes[index]), dtype=torch.float32)


def reseed(worker_id):
    info = torch.utils.data.get_worker_info()
    info.dataset.jitter.rng = np.random.RandomState(info.seed % 2**32)


def main():
    torch.manual_seed(0)
    loader = DataLoader(Detections(), batch_size=4, num_workers=2, worker_init_fn=reseed)
    shifts = []
    for boxes in loader:
        shifts.append(boxes.mean().item())
    print(f"{len(shifts)} batches, mean box coordinate {np.mean(shifts):.2f}")


if __name__ == "__main__":
    main()
