# Modelled on burlachenkok/flpytorch#14
# (https://github.com/burlachenkok/flpytorch/pull/14): in a federated-learning simulation each
# client's batches come from a generator that turns its numpy labels into a float tensor, and
# CrossEntropyLoss stops with "expected scalar type Long but found Float". The line to change is
# where the generator makes the labels, not the loss. Fixed twin: the generator makes them long.
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def client_batches(features, labels, batch_size, rng):
    """Yield (inputs, labels) batches of one client's data, reshuffled every pass."""
    while True:
        order = rng.permutation(len(labels))
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            x = torch.from_numpy(features[idx])
            y = torch.from_numpy(labels[idx]).long()
            yield x, y


def local_update(model, batches, steps, lr=0.1):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        x, y = next(batches)
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


rng = np.random.default_rng(4)
torch.manual_seed(4)
features = rng.normal(size=(64, 10)).astype(np.float32)
labels = rng.integers(0, 3, size=64)
model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))
print(f"client loss {local_update(model, client_batches(features, labels, 16, rng), 4):.3f}")
