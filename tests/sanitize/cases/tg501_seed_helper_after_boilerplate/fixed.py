# Fixed twin of buggy.py (https://github.com/FunctionLab/selene/pull/173): the seeding helper seeds
# numpy's global generator too.
import random

import numpy as np
import torch
from torch import nn

torch.manual_seed(0)


def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def train(config):
    set_seed(config["seed"])
    features = torch.randn(200, 4)
    labels = (features[:, 0] > 0).long()
    subset = np.random.choice(200, size=64, replace=False)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for start in range(0, 64, 16):
        idx = torch.from_numpy(subset[start:start + 16])
        loss = nn.functional.cross_entropy(model(features[idx]), labels[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


print("loss", train({"seed": 3}))
