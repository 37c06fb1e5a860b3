# Near miss for TG502: a seeded, deterministic training run (cudnn.benchmark off,
# cudnn.deterministic on) is followed by an inference-speed measurement that turns
# cudnn.benchmark on so cuDNN can autotune for the fixed input shape; no optimizer step runs after
# the flag is set. Pattern from an inference benchmark that warms cuDNN's autotuner before timing
# (https://github.com/Alibaba-MIIL/TResNet/issues/3).
import random
import time

import numpy as np
import torch
from torch import nn

random.seed(0)
np.random.seed(0)
torch.manual_seed(0)
torch.backends.cudnn.benchmark = False
torch.backends.cudnn.deterministic = True

model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
images, labels = torch.randn(8, 1, 8, 8), torch.randint(0, 2, (8,))
for step in range(3):
    opt.zero_grad()
    nn.functional.cross_entropy(model(images), labels).backward()
    opt.step()


def inference_speed(model, batch_size=16, runs=5):
    torch.backends.cudnn.benchmark = True  # autotune for this one input shape
    model.eval()
    batch = torch.randn(batch_size, 1, 8, 8)
    with torch.no_grad():
        model(batch)  # warm-up: cuDNN picks its algorithms here
        start = time.perf_counter()
        for _ in range(runs):
            model(batch)
    return runs * batch_size / (time.perf_counter() - start)


print(f"{inference_speed(model):.0f} images/s")
