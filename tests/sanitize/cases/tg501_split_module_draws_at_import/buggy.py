# Modelled on marco-c/autowebcompat#160 ("We need to fix the seed for random so that the
# test-train split doesn't vary", https://github.com/marco-c/autowebcompat/issues/160): the
# script seeds torch, then imports the project's split module, whose top-level code shuffles the
# file list with Python's random, which nothing seeds. That module also imports an image library
# that draws from random at import; that draw is the library's, the shuffle is the project's:
# the split differs every run.
import os
import sys

import torch
from torch import nn

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "site-packages"))

torch.manual_seed(0)  # expect: TG501

import tg501_splits  # noqa: E402

labels = {name: i % 2 for i, name in enumerate(sorted(tg501_splits.FILES))}
features = {name: torch.randn(6) for name in sorted(tg501_splits.FILES)}
model = nn.Linear(6, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    for name in tg501_splits.TRAIN:
        loss = nn.functional.cross_entropy(model(features[name])[None],
                                           torch.tensor([labels[name]]))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
print("validation files", tg501_splits.VALID[:3])
