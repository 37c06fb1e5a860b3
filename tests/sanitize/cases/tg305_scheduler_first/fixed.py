# Fixed twin of buggy.py (https://github.com/gjy3035/C-3-Framework/issues/96; order from
# https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate): the per-epoch scheduler
# steps after the epoch's optimizer steps, and a OneCycleLR run steps per batch, after each
# optimizer step, as it is designed to.
import torch
from torch import nn

torch.manual_seed(17)
x, y = torch.randn(32, 3), torch.randn(32, 1)
model = nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
for epoch in range(4):
    for batch in range(4):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    scheduler.step()

one_cycle_opt = torch.optim.SGD(model.parameters(), lr=0.1)
one_cycle = torch.optim.lr_scheduler.OneCycleLR(one_cycle_opt, max_lr=0.2, total_steps=12)
warmup = torch.optim.lr_scheduler.SequentialLR(
    one_cycle_opt, [torch.optim.lr_scheduler.LinearLR(one_cycle_opt, start_factor=0.5, total_iters=2),
                    torch.optim.lr_scheduler.ConstantLR(one_cycle_opt, factor=1.0)], milestones=[2])
for batch in range(12):
    one_cycle_opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    one_cycle_opt.step()
    one_cycle.step()
print(f"lr {scheduler.get_last_lr()[0]:.4f} {one_cycle.get_last_lr()[0]:.4f}")
