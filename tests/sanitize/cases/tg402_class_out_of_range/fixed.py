# Fixed twin of buggy.py (https://github.com/EricFillion/happy-transformer/issues/248):
# the labels are shifted to 0..2; ignore_index marks unlabeled rows.
import torch
from torch import nn

torch.manual_seed(12)
x = torch.randn(20, 5)
y = torch.randint(1, 4, (20,)) - 1
y[0] = -100
model = nn.Linear(5, 3)
loss = nn.functional.cross_entropy(model(x), y)
loss.backward()
print(f"loss {loss.item():.3f}")
