# Modelled on https://github.com/sdv-dev/CTGAN/issues/37: a WGAN-GP critic step backpropagates its
# gradient penalty with retain_graph=True, then its Wasserstein loss through another graph, before
# one optimizer step. The retained backward is not the step's last: silent.
import torch
import torch.nn as nn

torch.manual_seed(3)

gen = nn.Sequential(nn.Linear(4, 8))
critic = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
opt_g = torch.optim.Adam(gen.parameters(), lr=1e-4)
opt_c = torch.optim.Adam(critic.parameters(), lr=1e-4)


def penalty(real, fake):
    alpha = torch.rand(real.size(0), 1)
    mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    grads = torch.autograd.grad(critic(mixed).sum(), mixed, create_graph=True)[0]
    return ((grads.norm(2, dim=1) - 1) ** 2).mean() * 10


for step in range(3):
    real = torch.randn(16, 8)
    fake = gen(torch.randn(16, 4))
    pen = penalty(real, fake.detach())
    loss_c = critic(fake.detach()).mean() - critic(real).mean()
    opt_c.zero_grad()
    pen.backward(retain_graph=True)
    loss_c.backward()
    opt_c.step()
    loss_g = -critic(gen(torch.randn(16, 4))).mean()
    opt_g.zero_grad()
    loss_g.backward()
    opt_g.step()
