# Report: https://github.com/ourownstory/neural_prophet/issues/147 (look-alike)
# A validation set drawn every epoch by a function that first resets numpy and random to a
# fixed seed (the same set each time) while torch, seeded once at the top, keeps going: the reset
# fixes one draw, it is not the run's seeding helper, so torch need not be reset with it.
import random

import numpy as np
import torch
from torch import nn

torch.manual_seed(0)


def validation_set(seed=123, n=64):
    random.seed(seed)
    np.random.seed(seed)
    idx = random.sample(range(1000), n)
    noise = np.random.normal(size=(n, 4)).astype(np.float32)
    return torch.tensor(idx, dtype=torch.float32).unsqueeze(1) / 1000 + torch.from_numpy(noise)


model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for epoch in range(3):
    for _ in range(4):
        x = torch.randn(16, 4)
        loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        val = validation_set()
        print(epoch, (model(val) - val.sum(1, keepdim=True)).pow(2).mean().item())
