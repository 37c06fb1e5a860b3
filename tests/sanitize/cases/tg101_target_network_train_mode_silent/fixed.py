# Modelled on https://github.com/Lightning-Universe/lightning-bolts/issues/801: BYOL. The target
# network is an EMA copy of the online network, kept in training mode (its BatchNorm normalizes
# each view's batch, as in the method) and run under no_grad; its output is the target of the
# loss that trains the online branch, computed in a helper. Not an evaluation: silent.
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def mlp(i, o):
    return nn.Sequential(nn.Linear(i, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, o))


online = nn.Sequential(mlp(16, 8))
predictor = mlp(8, 8)
target = copy.deepcopy(online).requires_grad_(False)
optimizer = torch.optim.Adam([*online.parameters(), *predictor.parameters()], lr=1e-3)


def regression_loss(p, z):
    return 2 - 2 * F.cosine_similarity(p, z, dim=-1).mean()


def shared_step(a, b):
    p = predictor(online(a))
    with torch.no_grad():
        z = target(b)
    return regression_loss(p, z)


for step in range(20):
    x = torch.randn(32, 16)
    online.train()
    target.train()
    loss = shared_step(x + 0.1 * torch.randn_like(x), x + 0.1 * torch.randn_like(x))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        for po, pt in zip(online.parameters(), target.parameters()):
            pt.mul_(0.99).add_(po, alpha=0.01)
print(loss.item())
