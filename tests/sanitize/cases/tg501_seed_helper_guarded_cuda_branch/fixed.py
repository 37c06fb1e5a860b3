# Report: https://github.com/fastai/course-v3/pull/291
# Notebook cells: a sweep over learning rates reseeds every generator, torch's CPU one included,
# before each trial, so the trials differ only in their learning rate.
import os
import random

import numpy as np
import torch
from torch import nn

# %% cell 1: setup
torch.manual_seed(1234)
VOCAB, CLASSES = 50, 3


class Reseeder:
    def __call__(self, seed):
        os.environ["PYTHONHASHSEED"] = str(seed)
        np.random.seed(seed)
        random.seed(seed)
        torch.manual_seed(seed)
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(seed)
        else:
            pass


reseed = Reseeder()
bags = torch.rand(96, VOCAB)
labels = bags[:, :CLASSES].argmax(1)


# %% cell 2: one trial
def trial(lr):
    reseed(7)
    model = nn.Sequential(nn.Linear(VOCAB, 16), nn.Dropout(0.2), nn.Linear(16, CLASSES))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(3):
        for idx in torch.randperm(len(bags)).chunk(6):
            opt.zero_grad()
            nn.functional.cross_entropy(model(bags[idx]), labels[idx]).backward()
            opt.step()
    return model


# %% cell 3: the sweep
scores = {lr: trial(lr)[0].weight.sum().item() for lr in (0.1, 0.3)}
print(scores)
