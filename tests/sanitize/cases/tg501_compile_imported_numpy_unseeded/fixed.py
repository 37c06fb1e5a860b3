# Modelled on reports of runs that differ although
# torch is seeded ("Reproducibility - torch.manual_seed + numpy.random.seed",
# https://github.com/Novartis/scar/issues/97), in a script that imports torch._dynamo first, as
# torchvision and torch.compile do: dynamo then wraps torch.manual_seed in its own disable
# wrapper (torch/_dynamo/__init__.py), and the seed call must still count. The augmentation
# draws from numpy's global generator, which is never seeded. Fixed twin: numpy is seeded too.
import numpy as np
import torch
import torch._dynamo  # noqa: F401  (what torchvision and torch.compile import)
from torch import nn


def augment(batch: torch.Tensor) -> torch.Tensor:
    noise = np.random.normal(0.0, 0.05, size=tuple(batch.shape)).astype("float32")
    return batch + torch.from_numpy(noise)


torch.manual_seed(0)
np.random.seed(0)
features = torch.randn(48, 6)
labels = (features[:, 0] > 0).long()
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(augment(features)), labels)
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
