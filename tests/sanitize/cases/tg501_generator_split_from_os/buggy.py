# Modelled on GitHub diningphil/PyDGN#31 (https://github.com/diningphil/PyDGN/issues/31): the
# data splits differ from one run to the next although the experiment sets its seed. Here the
# splitter draws the folds from a numpy Generator it makes with np.random.default_rng() (its
# seed argument defaults to None, so the generator is seeded from the OS), while the run seeds
# torch and numpy's global generator: the global seeds never reach a Generator object.
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

SEED = 11
torch.manual_seed(SEED)
np.random.seed(SEED)


class HoldoutSplitter:
    def __init__(self, n_items, test_ratio=0.25, seed=None):
        self.n_items, self.test_ratio, self.seed = n_items, test_ratio, seed

    def split(self):
        rng = np.random.default_rng(self.seed)  # expect: TG501
        order = rng.permutation(self.n_items)
        n_test = int(self.n_items * self.test_ratio)
        return order[n_test:], order[:n_test]


features = torch.randn(96, 8)
targets = (features[:, :2].sum(1) > 0).long()
train_idx, test_idx = HoldoutSplitter(len(features)).split()
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
