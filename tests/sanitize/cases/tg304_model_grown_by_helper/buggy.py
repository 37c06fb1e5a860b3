# Modelled on soumith/net2net.torch#1 (https://github.com/soumith/net2net.torch/issues/1): after a
# network is expanded in the middle of training, "the model ceases learning". A helper returns a
# deeper copy of the regressor (Net2Net-style: the new layer starts as the identity) and the
# script rebinds its model name to it, while the optimizer built at the start keeps stepping the
# old parameters. Fixed twin: a new optimizer right after the model is grown.
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
        regressor = deepen(regressor)  # expect: TG304
    loss = nn.functional.mse_loss(regressor(t), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"final mse {loss.item():.4f}")
