# The twin of buggy.py: the head flattens each window (torch.flatten(h, 1)) and its first Linear
# takes one window's features, so the model returns one row per sample. A second model pools a
# set of windows into one summary row on purpose (a mean over the batch) and is trained towards
# one target row: one row against one row, nothing broadcasts.
import torch
from torch import nn
import torch.nn.functional as F

BATCH = 16


class WindowRegressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(3, 8, 5, padding=2), nn.ReLU(), nn.MaxPool1d(4))
        self.head = nn.Sequential(nn.Linear(8 * 8, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, x):
        h = self.conv(x)
        h = torch.flatten(h, 1)
        return self.head(h)


class SetSummary(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = WindowRegressor()

    def forward(self, x):
        return self.net(x).mean(0, keepdim=True)


torch.manual_seed(0)
windows = torch.randn(320, 3, 32)
targets = torch.stack([windows[:, 0].mean(1), windows[:, 1].std(1)], dim=1)
for model in (WindowRegressor(), SetSummary()):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(3):
        for i in range(0, len(windows), BATCH):
            optimizer.zero_grad()
            target = targets[i:i + BATCH]
            if isinstance(model, SetSummary):
                target = target.mean(0, keepdim=True)
            loss = F.l1_loss(model(windows[i:i + BATCH]), target)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")
