# Modelled on line/open-universe#5 (https://github.com/line/open-universe/issues/5): the
# discriminator optimizer is built from two discriminators' parameters, but a copy-paste slip
# lists the first one's twice; the second discriminator receives gradients every step and never
# changes. Reported at the list handed to the optimizer.
import torch
from torch import nn


torch.manual_seed(0)
generator = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))
disc_a = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
disc_b = nn.Sequential(nn.Linear(8, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
opt_g = torch.optim.Adam(generator.parameters(), lr=1e-3)
params_disc = list(disc_a.parameters()) + list(disc_b.parameters())
opt_d = torch.optim.Adam(params_disc, lr=1e-3)

for step in range(16):
    real, noise = torch.randn(16, 8) + 1.0, torch.randn(16, 8)
    fake = generator(noise)
    opt_d.zero_grad()
    d_loss = sum(((d(real) - 1) ** 2).mean() + (d(fake.detach()) ** 2).mean()
                 for d in (disc_a, disc_b))
    d_loss.backward()
    opt_d.step()
    opt_g.zero_grad()
    g_loss = sum(((d(fake) - 1) ** 2).mean() for d in (disc_a, disc_b))
    g_loss.backward()
    opt_g.step()
