# Fixed twin of buggy.py (https://github.com/Thunderbeee/ZSCL/issues/6):
# the teacher scores are normalized with softmax, one-hot float targets are fine, and the binary
# labels are mapped to 0/1 (soft labels in [0, 1] are fine too).
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(10)
x = torch.randn(32, 6)
scores = torch.randn(32, 3) * 2
model = nn.Linear(6, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
one_hot = F.one_hot(torch.randint(0, 3, (32,)), 3).float()
for step in range(3):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), scores.softmax(dim=1)) + F.cross_entropy(model(x), one_hot)
    loss.backward()
    optimizer.step()

labels = (torch.randint(0, 2, (32, 1)).float() * 0.9 + 0.05)  # smoothed 0/1 labels
binary = nn.Linear(6, 1)
opt_b = torch.optim.SGD(binary.parameters(), lr=0.1)
criterion = nn.BCEWithLogitsLoss()
for step in range(3):
    opt_b.zero_grad()
    loss_b = criterion(binary(x), labels)
    loss_b.backward()
    opt_b.step()
print(f"{loss.item():.3f} {loss_b.item():.3f}")
