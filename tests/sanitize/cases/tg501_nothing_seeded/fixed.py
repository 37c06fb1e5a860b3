# Near miss for TG501: a script that seeds nothing and sets no determinism flag has not asked to
# be reproducible (a quick experiment, a data-augmentation demo); drawing from torch, numpy and
# random unseeded is its intent. PyTorch's reproducibility notes
# (https://pytorch.org/docs/stable/notes/randomness.html) describe seeding as opt-in.
import random

import numpy as np
import torch
from torch import nn

noise = np.random.normal(size=(16, 4)).astype("float32")
x = torch.from_numpy(noise)
y = torch.tensor([random.randint(0, 1) for _ in range(16)])
model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
print(f"final loss {nn.functional.cross_entropy(model(x), y).item():.3f}")
