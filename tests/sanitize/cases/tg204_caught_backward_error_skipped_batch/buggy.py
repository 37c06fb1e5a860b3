# Modelled on GitHub RangiLyu/nanodet#7 (https://github.com/RangiLyu/nanodet/issues/7): a
# detector's loss returns a fresh `torch.tensor(0.0)` when a batch has no positive samples, and the
# training loop wraps each step in `try/except RuntimeError` to skip bad batches, so backward's
# "element 0 of tensors does not require grad" is swallowed and those batches train nothing.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cls = nn.Linear(8, 3)
        self.box = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor):
        return self.cls(x), self.box(x)


def detection_loss(cls_out, box_out, labels, boxes):
    pos = labels >= 0
    if not pos.any():
        return torch.tensor(0.0)
    return F.cross_entropy(cls_out[pos], labels[pos]) + F.smooth_l1_loss(box_out[pos], boxes[pos])


model = Head()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
skipped = 0
for step in range(8):
    x = torch.randn(4, 8)
    labels = torch.randint(0, 3, (4,)) if step % 3 else torch.full((4,), -1)
    boxes = torch.randn(4, 4)
    cls_out, box_out = model(x)
    loss = detection_loss(cls_out, box_out, labels, boxes)
    optimizer.zero_grad()
    try:
        loss.backward()  # expect: TG204
    except RuntimeError:
        skipped += 1
        continue
    optimizer.step()
print(f"skipped {skipped} batches")
