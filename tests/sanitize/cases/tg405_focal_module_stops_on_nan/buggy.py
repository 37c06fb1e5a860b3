# Modelled on the GitHub issue "Binary focal loss is numerically unstable"
# (https://github.com/kornia/kornia/issues/2115): a hand-written binary focal loss takes
# log(sigmoid(-logit)); once a logit is large, sigmoid(-logit) is exactly 0, log gives -inf,
# and (1 - target) * -inf = 0 * -inf is NaN. The training function stops at the first
# non-finite loss, before any backward, so only the forward shows it.
import torch
from torch import nn


class FocalLoss(nn.Module):
    def __init__(self, gamma=2.0):
        super().__init__()
        self.gamma = gamma

    def forward(self, logits, target):
        p = torch.sigmoid(logits)
        pos = -target * (1 - p) ** self.gamma * torch.log(torch.sigmoid(logits))  # expect: TG405
        neg = -(1 - target) * p ** self.gamma * torch.log(torch.sigmoid(-logits))
        return (pos + neg).mean()


def make_model():
    return nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 3))


def fit(model, criterion, optimizer, batches):
    for step, (x, y) in enumerate(batches):
        loss = criterion(model(x), y)
        if not torch.isfinite(loss):
            return step
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return None


torch.manual_seed(5)
model = make_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
batches = []
for i in range(8):
    x, y = torch.randn(6, 5), (torch.rand(6, 3) > 0.5).float()
    if i == 5:
        x = x * 400.0  # an unscaled batch saturates the logits
    batches.append((x, y))
print("stopped at", fit(model, FocalLoss(), optimizer, batches))
