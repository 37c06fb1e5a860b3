# Modelled on the GitHub issue "Need Help! Loss nan"
# (https://github.com/summerlvsong/Aggregation-Cross-Entropy/issues/2): an aggregation loss
# sums the softmax of every time step per class and takes torch.log of it; a class that no step
# predicts has an aggregated score of exactly 0 once the softmax saturates, its log is -inf, and
# the KL divergence to the label counts is NaN. The loop stops at the first non-finite loss,
# before any backward, so only the loss as it is computed shows it.
import torch
from torch import nn


class StepClassifier(nn.Module):
    def __init__(self, dim=8, classes=6):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, classes))

    def forward(self, x):  # (N, T, dim) -> (N, T, classes)
        return self.net(x)


def train(model, criterion, optimizer, batches):
    for step, (x, counts) in enumerate(batches):
        probs = model(x).softmax(dim=-1)
        aggregated = probs.mean(dim=1)  # (N, classes): the share of steps given to each class
        log_share = torch.log(aggregated)  # expect: TG405
        loss = criterion(log_share, counts / x.shape[1])
        if not torch.isfinite(loss):
            return step
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return None


torch.manual_seed(0)
model = StepClassifier()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
batches = []
for i in range(60):
    x = torch.randn(4, 5, 8)
    labels = torch.randint(0, 6, (4, 5))
    counts = nn.functional.one_hot(labels, 6).sum(dim=1).float()
    if i == 50:
        x = x * 1e4  # an unnormalised batch saturates every step's softmax
    batches.append((x, counts))
print("stopped at", train(model, nn.KLDivLoss(reduction="batchmean"), optimizer, batches))
