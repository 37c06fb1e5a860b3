# Near miss for TG502: a seeded run measures inference speed with cudnn.benchmark on inside
# torch.backends.cudnn.flags(...), which restores the flag when the block ends; training then runs
# with benchmark off. Pattern from PyTorch's reproducibility notes
# (https://pytorch.org/docs/stable/notes/randomness.html#cuda-convolution-benchmarking) and the
# flags() context manager (https://github.com/pytorch/pytorch/blob/main/torch/backends/cudnn/__init__.py).
import time

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))
images = torch.randn(8, 1, 8, 8)
with torch.backends.cudnn.flags(enabled=True, benchmark=True), torch.no_grad():
    start = time.perf_counter()
    model(images)
    print(f"inference {1e3 * (time.perf_counter() - start):.2f} ms")

opt = torch.optim.SGD(model.parameters(), lr=0.1)
labels = torch.randint(0, 2, (8,))
for step in range(3):
    opt.zero_grad()
    nn.functional.cross_entropy(model(images), labels).backward()
    opt.step()
