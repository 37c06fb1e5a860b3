# Modelled on the pull request "Additional seeding for reproducibility"
# (https://github.com/FunctionLab/selene/pull/173): the script seeds torch once at the top, then
# its own seeding helper applies the configured seed to torch and random but not to numpy, whose
# global generator picks the training subset, so runs with the same seed differ.
import random

import numpy as np
import torch
from torch import nn

torch.manual_seed(0)


def set_seed(seed):
    random.seed(seed)
    torch.manual_seed(seed)  # expect: TG501


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
