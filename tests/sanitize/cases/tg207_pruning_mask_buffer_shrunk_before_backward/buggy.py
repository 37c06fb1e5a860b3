# Report: https://github.com/pytorch/pytorch/issues/22095
# Modelled on pytorch/pytorch#22095: a buffer that a forward multiplies by (so the product saves
# it for backward) is changed in place before backward runs, and backward fails with "is at
# version N; expected version N-1" naming no op, as the buffer has no autograd history. Here a
# tabular regressor gates its hidden units with a pruning mask kept as a buffer, and the training
# step decays the mask in place between the forward and the backward.
import torch
from torch import nn

torch.manual_seed(0)


class GatedRegressor(nn.Module):
    def __init__(self, n_features=8, hidden=16):
        super().__init__()
        self.inp = nn.Linear(n_features, hidden)
        self.out = nn.Linear(hidden, 1)
        self.register_buffer("gate", torch.ones(hidden))

    def forward(self, x):
        h = torch.tanh(self.inp(x)) * self.gate
        return self.out(h).squeeze(-1)


def train_step(net, opt, x, y):
    pred = net(x)
    loss = ((pred - y) ** 2).mean()
    net.gate.mul_(0.98)  # expect: TG207
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


net = GatedRegressor()
opt = torch.optim.SGD(net.parameters(), lr=0.05)
features = torch.randn(64, 8)
target = features[:, 0] - 0.5 * features[:, 3]
for epoch in range(5):
    print(f"epoch {epoch}: mse {train_step(net, opt, features, target):.4f}")
