# Report: https://github.com/ultralytics/ultralytics/pull/11217
# The fixed twin of buggy.py (see there): the trainer still zeroes the gradients at the start of
# every epoch, but counts micro-batches within the epoch, so every optimizer step follows a full
# accumulation of `accumulate` batches. The two batches after an epoch's last step are dropped
# by the next epoch's zero_grad: a remainder of the declared accumulation, one of the choices
# Lightning-AI/pytorch-lightning#19987 lists for the end of an epoch, not a broken step.
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
for epoch in range(6):
    optimizer.zero_grad()
    for i in range(batches):
        x, y = images[i * 8:(i + 1) * 8], targets[i * 8:(i + 1) * 8]
        loss = F.smooth_l1_loss(model(x), y) / accumulate
        loss.backward()
        if (i + 1) % accumulate == 0:
            optimizer.step()
            optimizer.zero_grad()
print(f"loss {loss.item() * accumulate:.4f}")
