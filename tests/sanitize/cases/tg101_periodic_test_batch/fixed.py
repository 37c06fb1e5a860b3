# Fixed twin of buggy.py (https://github.com/fxia22/pointnet.pytorch/pull/19): the periodic test
# batch is scored in eval mode; the next iteration calls net.train() again.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

net = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
train_loader = DataLoader(TensorDataset(torch.randn(64, 6), torch.randint(0, 3, (64,))), 8)
test_loader = DataLoader(TensorDataset(torch.randn(32, 6), torch.randint(0, 3, (32,))), 8)

for epoch in range(2):
    for i, (x, y) in enumerate(train_loader):
        net.train()
        optimizer.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        optimizer.step()
        if i % 4 == 0:
            xt, yt = next(iter(test_loader))
            net.eval()
            with torch.no_grad():
                logits = net(xt)
            test_loss = F.cross_entropy(logits, yt).item()
            acc = (logits.argmax(1) == yt).float().mean().item()
            print(f"[{epoch}:{i}] train {loss.item():.3f} test {test_loss:.3f} acc {acc:.3f}")
