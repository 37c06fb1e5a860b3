# Report: https://github.com/ultralytics/ultralytics/pull/11217
# Modelled on ultralytics/ultralytics#11217: a detection trainer accumulates gradients and steps
# when `ni - last_opt_step >= accumulate`, counting batches across epochs, yet also zeroes the
# gradients at the start of every epoch. The batches after an epoch's last step are thrown away
# there, and the first step of the next epoch comes after only the few batches left to reach
# the count: that step learns from a fraction of the accumulation its loss was scaled for. The
# fixed twin counts micro-batches per epoch, so every step follows a full accumulation and only
# an epoch's remainder is dropped (one of the choices Lightning-AI/pytorch-lightning#19987 lists).
import torch
import torch.nn.functional as F
from torch import nn


class BoxRegressor(nn.Module):
    def __init__(self, features: int = 12, boxes: int = 4) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(features, 32), nn.SiLU(), nn.Linear(32, 32))
        self.head = nn.Linear(32, boxes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(F.silu(self.backbone(x)))


torch.manual_seed(0)
images = torch.randn(80, 12)
targets = images[:, :4].tanh()
model = BoxRegressor()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
accumulate = 4  # batches per optimizer step
batches = 10  # per epoch: the last two of each epoch complete no accumulation
last_opt_step = -1
for epoch in range(6):
    optimizer.zero_grad()  # expect: TG302
    for i in range(batches):
        ni = i + batches * epoch  # batches seen since the start of training
        x, y = images[i * 8:(i + 1) * 8], targets[i * 8:(i + 1) * 8]
        loss = F.smooth_l1_loss(model(x), y) / accumulate
        loss.backward()
        if ni - last_opt_step >= accumulate:
            optimizer.step()
            optimizer.zero_grad()
            last_opt_step = ni
print(f"loss {loss.item() * accumulate:.4f}")
