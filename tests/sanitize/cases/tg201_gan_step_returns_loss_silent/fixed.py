# Near miss for TG201: a GAN whose step helper backpropagates, steps and returns the loss tensor
# (as many DCGAN ports do, e.g. the PyTorch DCGAN tutorial's losses kept for logging,
# https://pytorch.org/tutorials/beginner/dcgan_faces_tutorial.html). The caller's `g_loss` keeps
# the previous iteration's generator graph alive until the helper returns the new one: with two
# optimizers that is two optimizer steps, but one iteration, and it does not grow.
import torch
from torch import nn

torch.manual_seed(24)
G = nn.Sequential(nn.Linear(4, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 2))
D = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Dropout(0.3), nn.Linear(32, 1))
bce = nn.BCEWithLogitsLoss()
opt_g = torch.optim.Adam(G.parameters(), lr=2e-3, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(D.parameters(), lr=2e-3, betas=(0.5, 0.999))


def real_batch(n=64):
    t = torch.rand(n) * 6.28
    return torch.stack([t.cos(), t.sin()], 1) + 0.05 * torch.randn(n, 2)


def gan_loss(net, inp, real, opt=None):
    pred = net(inp)
    loss = bce(pred, torch.full_like(pred, 1.0 if real else 0.0))
    if opt is not None:
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss


for step in range(40):
    real = real_batch()
    fake = G(torch.randn(64, 4))
    d_loss = 0.5 * (gan_loss(D, real, True) + gan_loss(D, fake.detach(), False))
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    g_loss = gan_loss(D, fake, True, opt=opt_g)
    if step % 10 == 0:
        print(step, round(d_loss.item(), 3), round(g_loss.item(), 3))
