# Modelled on the relativistic GAN of eriklindernoren/PyTorch-GAN#52
# (https://github.com/eriklindernoren/PyTorch-GAN/issues/52): the generator's relativistic loss,
# adversarial_loss(fake_pred - real_pred.mean(0, keepdim=True), valid), takes the real batch's
# score from the discriminator's step detached: a constant for the generator, whose graph the
# discriminator's backward freed.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(5)
generator = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
discriminator = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
opt_g = torch.optim.Adam(generator.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(discriminator.parameters(), lr=1e-3)
valid, fake_label = torch.ones(8, 1), torch.zeros(8, 1)

for step in range(3):
    real_points = torch.randn(8, 2) * 0.5 + 1.0
    gen_points = generator(torch.randn(8, 4))

    opt_d.zero_grad()
    real_pred = discriminator(real_points)
    fake_pred = discriminator(gen_points.detach())
    d_loss = F.binary_cross_entropy_with_logits(real_pred - fake_pred.mean(0, keepdim=True), valid)
    d_loss.backward()
    opt_d.step()

    opt_g.zero_grad()
    fake_pred = discriminator(gen_points)
    relative = fake_pred - real_pred.detach().mean(0, keepdim=True)
    g_loss = F.binary_cross_entropy_with_logits(relative, valid)
    g_loss.backward()
    opt_g.step()
