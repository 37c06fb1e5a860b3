# Fixed twin of buggy.py (https://github.com/pytorch/pytorch/issues/22095): the gate buffer is
# decayed after the optimizer step, once backward no longer needs the value the forward saved.
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
    opt.zero_grad()
    loss.backward()
    opt.step()
    net.gate.mul_(0.98)
    return loss.item()


net = GatedRegressor()
opt = torch.optim.SGD(net.parameters(), lr=0.05)
features = torch.randn(64, 8)
target = features[:, 0] - 0.5 * features[:, 3]
for epoch in range(5):
    print(f"epoch {epoch}: mse {train_step(net, opt, features, target):.4f}")
