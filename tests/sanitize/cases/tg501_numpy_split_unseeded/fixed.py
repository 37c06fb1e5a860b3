# Fixed twin of Novartis/scar#97 (https://github.com/Novartis/scar/issues/97): numpy's global
# generator is seeded next to torch's, so the split and the training repeat exactly.
import numpy as np
import torch
from torch import nn

SEED = 0
torch.manual_seed(SEED)
np.random.seed(SEED)
features = torch.randn(40, 4)
labels = (features.sum(dim=1) > 0).long()
order = np.random.permutation(len(features))
train_idx = torch.as_tensor(order[:32])
model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(features[train_idx]), labels[train_idx])
    loss.backward()
    opt.step()
print(f"loss {loss.item():.3f}")
