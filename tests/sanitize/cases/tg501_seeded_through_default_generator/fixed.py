# Seeding torch through its generator object: torch.default_generator.manual_seed(seed)
# (https://pytorch.org/docs/stable/torch.html#torch.torch.default_generator and
# https://pytorch.org/docs/stable/generated/torch.Generator.html#torch.Generator.manual_seed) seeds
# the same default CPU generator as torch.manual_seed; numpy and random are seeded too, so the run
# is reproducible and TG501 stays silent.
import random

import numpy as np
import torch
from torch import nn

torch.default_generator.manual_seed(31337)
np.random.seed(31337)
random.seed(31337)
model = nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    x = torch.randn(8, 3) + float(np.random.normal()) + random.random()
    optimizer.zero_grad()
    model(x).pow(2).mean().backward()
    optimizer.step()
