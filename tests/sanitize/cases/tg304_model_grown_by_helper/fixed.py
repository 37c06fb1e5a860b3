# Fixed twin of buggy.py (https://github.com/soumith/net2net.torch/issues/1): the optimizer is
# built again for the grown network right after the helper returns it.
import torch
from torch import nn


def deepen(net):
    hidden = net[0].out_features
    extra = nn.Linear(hidden, hidden)
    with torch.no_grad():
        extra.weight.copy_(torch.eye(hidden))
        extra.bias.zero_()
    return nn.Sequential(net[0], net[1], extra, nn.ReLU(), *list(net)[2:])


torch.manual_seed(0)
t = torch.linspace(0, 6, 200).unsqueeze(1)
target = torch.sin(t) + 0.1 * t
regressor = nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Linear(16, 1))
optimizer = torch.optim.Adam(regressor.parameters(), lr=1e-2)

for epoch in range(40):
    if epoch == 20:
        regressor = deepen(regressor)
        optimizer = torch.optim.Adam(regressor.parameters(), lr=1e-2)
    loss = nn.functional.mse_loss(regressor(t), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"final mse {loss.item():.4f}")
