# Modelled on https://github.com/coarse-graining/cgnet/issues/105: an energy network fitted on
# forces only (force matching). The forces are -d(energy)/d(coordinates), taken with
# create_graph=True; the last Linear's bias adds a constant to the energy and has no derivative,
# so it never gets a gradient. That is the loss's form, not a cut: silent.
import torch
import torch.nn as nn

torch.manual_seed(1)
coords = torch.randn(256, 3, 2)
bonds = (coords[:, 1:] - coords[:, :-1]).norm(dim=-1)
target = -(bonds - 1.0).unsqueeze(-1) * 0.1 + 0.01 * torch.randn(256, 2, 1)


class Energy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 1))

    def forward(self, x):
        d = (x[:, 1:] - x[:, :-1]).norm(dim=-1)
        energy = self.net(d).sum()
        return -torch.autograd.grad(energy, x, create_graph=True)[0]


model = Energy()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
for epoch in range(4):
    for i in range(0, 256, 32):
        x = coords[i:i + 32].clone().requires_grad_(True)
        forces = model(x)
        loss = (forces[:, 1:, :1] - target[i:i + 32]).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(epoch, loss.item())
