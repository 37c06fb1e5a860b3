# Near miss for TG501: when no seed is given, the run draws one from Python's random (unseeded, on
# purpose), seeds every generator with it and logs it, so the run can be repeated. The draw comes
# before the run asks to be reproducible, and random is seeded before its next use. Pattern from
# PyTorch's reproducibility notes (https://pytorch.org/docs/stable/notes/randomness.html) and the
# seed handling of pytorch/examples' ImageNet script
# (https://github.com/pytorch/examples/blob/main/imagenet/main.py).
import random
import sys

import numpy as np
import torch
from torch import nn

seed = int(sys.argv[1]) if len(sys.argv) > 1 else random.randint(0, 2**31 - 1)
print(f"seed {seed}")
random.seed(seed)
np.random.seed(seed % 2**32)
torch.manual_seed(seed)
model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.2), nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(16, 4)
y = torch.from_numpy(np.random.randint(0, 2, size=16))
for step in range(3):
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
print(random.choice(["done", "finished"]))
