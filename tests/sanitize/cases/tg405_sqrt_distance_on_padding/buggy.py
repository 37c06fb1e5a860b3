# Report: https://github.com/lilanxiao/Rotated_IoU/issues/20
# Modelled on lilanxiao/Rotated_IoU#20 ("Function 'SqrtBackward' returned nan values"): a box
# regression loss measures the distance between predicted and target centres with
# torch.sqrt of a sum of squares. Each image has up to four boxes; the padded slots are zero in
# both the (masked) prediction and the target, so their distance is exactly 0, the derivative of
# sqrt there is infinite, and multiplying by the zero mask afterwards turns it into NaN
# gradients while the loss itself stays finite.
import torch
from torch import nn


def center_distance_loss(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor):
    """pred, target: (N, 4, 2) box centres; mask: (N, 4), 1 for real boxes."""
    dist = torch.sqrt(((pred - target) ** 2).sum(-1))  # expect: TG405
    return (dist * mask).sum() / mask.sum()


def train_epoch(model, optimizer, batches):
    total = 0.0
    for feats, target, mask in batches:
        pred = model(feats).view(-1, 4, 2) * mask[..., None]
        loss = center_distance_loss(pred, target, mask)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(batches)


torch.manual_seed(3)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
batches = []
for _ in range(4):
    mask = (torch.rand(8, 4) < 0.6).float()
    batches.append((torch.randn(8, 16), torch.rand(8, 4, 2) * mask[..., None], mask))
print("loss", train_epoch(model, optimizer, batches))
print("weights finite:", all(bool(torch.isfinite(p).all()) for p in model.parameters()))
