# Fixed twin of buggy.py (modelled on marco-c/autowebcompat#160,
# https://github.com/marco-c/autowebcompat/issues/160): Python's random is seeded next to torch,
# before the split module shuffles the file list at import, so the split is the same every run.
# The image library that module imports still draws from random at import: that changes nothing
# the run would repeat differently.
import os
import random
import sys

import torch
from torch import nn

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "site-packages"))

random.seed(0)
torch.manual_seed(0)

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
