# A look-alike, in the style of Kaggle k-fold notebooks (e.g. the cross-validation loop discussed
# in https://discuss.pytorch.org/t/k-fold-cross-validation-with-pytorch/65785): each fold keeps
# its best epoch's weights in a file named for the epoch, loads them back to score the fold, and
# the next fold trains a new model with a new optimizer. Nothing is resumed: the weights loaded
# back are only evaluated, so a weights-only file is right.
import os
import tempfile

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
x, y = torch.randn(120, 6), torch.randint(0, 3, (120,))
folder = tempfile.mkdtemp()
scores = []
for fold in range(3):
    val = torch.arange(120) % 3 == fold
    net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    best, best_path = float("inf"), None
    for epoch in range(4):
        loss = F.cross_entropy(net(x[~val]), y[~val])
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            val_loss = F.cross_entropy(net(x[val]), y[val]).item()
        if val_loss < best:
            best, best_path = val_loss, os.path.join(folder, f"fold{fold}_epoch{epoch}.pt")
            torch.save(net.state_dict(), best_path)
    net.load_state_dict(torch.load(best_path))
    with torch.no_grad():
        scores.append((net(x[val]).argmax(1) == y[val]).float().mean().item())
print("fold accuracies", [round(s, 3) for s in scores])
