# Modelled on the AMP recipe's gradient-clipping note
# (https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-clipping) and the loops
# discussed in https://github.com/princeton-vl/RAFT/issues/104: here clip_grad_norm_ runs on the
# scaled gradients (no scaler.unscale_ before it), so the max_norm of 1.0 is compared with
# gradients 65536 times too large. The GradScaler runs on the CPU so the case runs anywhere.
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
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)  # expect: TG306
    scaler.step(optimizer)
    scaler.update()
print(f"loss {loss.item():.3f}")
