# Fixed twin of buggy.py (https://github.com/diningphil/PyDGN/issues/31): the splitter gets the
# run's seed, so its Generator is seeded; a second Generator seeded from the OS is made before
# the run sets its seeds and draws the seed it logs (the draw picks the seed, not the data).
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

SEED = int(np.random.default_rng().integers(2**31))  # a fresh seed, logged to rerun the run
print(f"seed {SEED}")
torch.manual_seed(SEED)
np.random.seed(SEED)


class HoldoutSplitter:
    def __init__(self, n_items, test_ratio=0.25, seed=None):
        self.n_items, self.test_ratio, self.seed = n_items, test_ratio, seed

    def split(self):
        rng = np.random.default_rng(self.seed)
        order = rng.permutation(self.n_items)
        n_test = int(self.n_items * self.test_ratio)
        return order[n_test:], order[:n_test]


features = torch.randn(96, 8)
targets = (features[:, :2].sum(1) > 0).long()
train_idx, test_idx = HoldoutSplitter(len(features), seed=SEED).split()
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    for start in range(0, len(train_idx), 24):
        batch = torch.as_tensor(train_idx[start:start + 24])
        loss = F.cross_entropy(model(features[batch]), targets[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
with torch.no_grad():
    test = torch.as_tensor(test_idx)
    accuracy = (model(features[test]).argmax(1) == targets[test]).float().mean()
print(f"test accuracy {accuracy:.3f}")
