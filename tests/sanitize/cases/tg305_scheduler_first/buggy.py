# Modelled on the GitHub issues "UserWarning: Detected call of `lr_scheduler.step()` before
# `optimizer.step()`" (https://github.com/gjy3035/C-3-Framework/issues/96,
# https://github.com/zju3dv/NeuralRecon/issues/51): the epoch loop steps the scheduler at its top,
# before any optimizer step, so the first value of the schedule is never used.
import warnings

import torch
from torch import nn

warnings.simplefilter("ignore", UserWarning)  # PyTorch's own warning, easy to lose in a log
torch.manual_seed(17)
x, y = torch.randn(32, 3), torch.randn(32, 1)
model = nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
for epoch in range(4):
    scheduler.step()  # expect: TG305
    for batch in range(4):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
print(f"lr {scheduler.get_last_lr()[0]:.4f}")
