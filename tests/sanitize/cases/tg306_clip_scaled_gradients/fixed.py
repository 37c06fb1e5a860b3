# Fixed twin of buggy.py (https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-clipping):
# scaler.unscale_(optimizer) before clipping; clipping without any GradScaler stays silent too.
import torch
from torch import nn

torch.manual_seed(20)
x, y = torch.randn(32, 6), torch.randn(32, 1)
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
scaler = torch.amp.GradScaler("cpu")
for step in range(4):
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = nn.functional.mse_loss(model(x).float(), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    scaler.step(optimizer)
    scaler.update()

plain = nn.Linear(6, 1)
plain_opt = torch.optim.SGD(plain.parameters(), lr=0.05)
for step in range(3):
    plain_opt.zero_grad()
    nn.functional.mse_loss(plain(x), y).backward()
    torch.nn.utils.clip_grad_value_(plain.parameters(), 0.5)
    plain_opt.step()
print(f"loss {loss.item():.3f}")
