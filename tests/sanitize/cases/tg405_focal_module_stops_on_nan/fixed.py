# Fixed twin of buggy.py (https://github.com/kornia/kornia/issues/2115): the log-probabilities come
# from F.logsigmoid, which stays finite for any logit.
import torch
import torch.nn.functional as F
from torch import nn


class FocalLoss(nn.Module):
    def __init__(self, gamma=2.0):
        super().__init__()
        self.gamma = gamma

    def forward(self, logits, target):
        p = torch.sigmoid(logits)
        pos = -target * (1 - p) ** self.gamma * F.logsigmoid(logits)
        neg = -(1 - target) * p ** self.gamma * F.logsigmoid(-logits)
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
