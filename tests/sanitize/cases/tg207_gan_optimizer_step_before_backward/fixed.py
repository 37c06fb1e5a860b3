# Fixed twin of buggy.py (https://github.com/pytorch/pytorch/issues/39141): the discriminator
# trains on a detached fake, and the generator's loss comes from a fresh D(fake) computed after
# opt_D.step(), so no backward runs through weights an optimizer has changed since its forward.
import math

import torch
from torch import nn

torch.manual_seed(39141)
points = torch.linspace(-1, 1, 15).repeat(32, 1)
G = nn.Sequential(nn.Linear(5, 64), nn.ReLU(), nn.Linear(64, 15))
D = nn.Sequential(nn.Linear(15, 64), nn.ReLU(), nn.Linear(64, 1), nn.Sigmoid())
opt_D = torch.optim.Adam(D.parameters(), lr=1e-4)
opt_G = torch.optim.Adam(G.parameters(), lr=1e-4)
for step in range(3):
    real = torch.sin(points * math.pi) + 0.02 * torch.randn(32, 1)
    fake = G(torch.randn(32, 5))
    D_loss = -torch.mean(torch.log(D(real)) + torch.log(1.0 - D(fake.detach())))
    opt_D.zero_grad()
    D_loss.backward()
    opt_D.step()
    G_loss = torch.mean(torch.log(1.0 - D(fake)))
    opt_G.zero_grad()
    G_loss.backward()
    opt_G.step()
