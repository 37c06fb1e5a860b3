# Modelled on diningphil/PyDGN#31 "Splitter seed not working"
# (https://github.com/diningphil/PyDGN/issues/31): "different runs of the same data split creation
# produce different splits, even though the seed has been set": here torch is seeded first, the
# file list is shuffled with Python's random, and random.seed only comes later, with the training
# setup. Fixed twin: random is seeded before the shuffle.
import random

import torch
from torch import nn

torch.manual_seed(0)
files = [f"sample_{i:03d}" for i in range(40)]
random.shuffle(files)  # drawn before random is seeded: a new split on every run
val_files, train_files = files[:8], files[8:]


def setup_training(seed):
    random.seed(seed)  # expect: TG501
    model = nn.Linear(4, 2)
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


model, opt = setup_training(0)
x = torch.randn(len(train_files), 4)
y = torch.randint(0, 2, (len(train_files),))
for step in range(3):
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
print(len(val_files), "validation files")
