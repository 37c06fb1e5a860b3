# Modelled on GitHub pytorch/pytorch#122757 (https://github.com/pytorch/pytorch/issues/122757):
# the model and the batch are on the accelerator, the loss is built somewhere else with class
# weights computed on the CPU; they are moved to the training device when the loss is built, so
# the loss call meets one device. The "meta" device stands in for "cuda".
import torch
from torch import nn

device = torch.device("meta")
torch.manual_seed(3)


def make_criterion(labels: torch.Tensor, n_classes: int) -> nn.Module:
    counts = torch.bincount(labels, minlength=n_classes).float()
    weights = counts.sum() / (n_classes * counts.clamp(min=1))
    return nn.CrossEntropyLoss(weight=weights.to(device))


labels = torch.randint(0, 4, (64,))
features = torch.randn(64, 12)
criterion = make_criterion(labels, 4)
model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 4)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for start in range(0, 64, 16):
    x, y = features[start:start + 16].to(device), labels[start:start + 16].to(device)
    loss = criterion(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
