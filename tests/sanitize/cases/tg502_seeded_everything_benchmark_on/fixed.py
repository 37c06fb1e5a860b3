# Modelled on braindecode/braindecode#360 (https://github.com/braindecode/braindecode/pull/360):
# a seeded example with cudnn.benchmark = True, where "GPU indeterminism may still make results
# substantially different between runs". The script seeds every generator so that runs repeat and
# leaves benchmark mode on, which picks convolution algorithms by timing. Fixed twin: benchmark
# off (https://pytorch.org/docs/stable/notes/randomness.html#cuda-convolution-benchmarking).
import random

import numpy as np
import torch
from torch import nn

random.seed(0)
np.random.seed(0)
torch.manual_seed(0)
torch.backends.cudnn.benchmark = False
model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
images = torch.randn(8, 1, 8, 8)
labels = torch.randint(0, 2, (8,))
for step in range(3):
    opt.zero_grad()
    nn.functional.cross_entropy(model(images), labels).backward()
    opt.step()
