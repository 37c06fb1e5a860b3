# Near miss for TG305: with a GradScaler, scaler.step(optimizer) skips optimizer.step() when the
# scaled gradients overflow (often the first iterations), and PyTorch's own "lr_scheduler.step()
# before optimizer.step()" warning misfires although the code's order is right
# (https://github.com/kekmodel/MPL-pytorch/issues/38, https://github.com/princeton-vl/RAFT/issues/104).
# A huge initial scale makes the first step overflow here on the CPU.
import warnings

import torch
from torch import nn

warnings.simplefilter("ignore", UserWarning)
torch.manual_seed(18)
x, y = torch.randn(16, 4), torch.randn(16, 1)
model = nn.Linear(4, 1)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-2, total_steps=6)
scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 127)
for step in range(6):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()
print(f"scale {scaler.get_scale():.3g} loss {loss.item():.3f}")
