# Modelled on SpeechBrain's handling of non-finite losses (Brain.check_loss_isfinite in
# https://github.com/speechbrain/speechbrain/blob/develop/speechbrain/core.py: a NaN or Inf loss is
# skipped, up to a patience, and training goes on): a regression whose targets hold Inf for a few
# corrupt records skips each batch with a non-finite loss before its backward, the last batch of
# the run among them. The skipped losses train nothing; the weights stay finite.
import math

import torch
from torch import nn

torch.manual_seed(4)
x = torch.randn(96, 6)
y = x.sum(dim=1, keepdim=True)
y[[10, 40, 95]] = float("inf")  # corrupt records, in the first, third and last batch
model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
skipped = 0
for epoch in range(2):
    for idx in torch.arange(96).split(16):
        loss = nn.functional.mse_loss(model(x[idx]), y[idx])
        if not math.isfinite(loss.item()):
            skipped += 1
            continue
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
assert all(torch.isfinite(p).all() for p in model.parameters()) and skipped == 6
