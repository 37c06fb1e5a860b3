# Modelled on SpeechBrain's handling of non-finite losses (Brain.check_loss_isfinite in
# https://github.com/speechbrain/speechbrain/blob/develop/speechbrain/core.py, which skips a NaN or
# Inf loss and goes on): the same regression without the check, so the Inf targets of a corrupt
# record reach backward and the step writes NaN into the weights.
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
        optimizer.zero_grad()
        loss.backward()  # expect: TG405
        optimizer.step()
print(skipped, math.isfinite(loss.item()))
