# Modelled on https://github.com/pytorch/pytorch/issues/39141 (a small GAN fitting sin(x) that
# fails from PyTorch 1.5 on with "[torch.FloatTensor [128, 1]], which is output 0 of TBackward, is
# at version 2"): the discriminator's optimizer steps between the discriminator's backward
# (retain_graph=True) and the generator's backward through the same D(fake) graph, so D's last
# weight, saved transposed by that graph, was updated in place by opt_D.step(), the line to
# move (after the generator's backward) or to follow with a fresh D(fake).
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
    prob_real, prob_fake = D(real), D(fake)
    D_loss = -torch.mean(torch.log(prob_real) + torch.log(1.0 - prob_fake))
    G_loss = torch.mean(torch.log(1.0 - prob_fake))
    opt_D.zero_grad()
    D_loss.backward(retain_graph=True)
    opt_D.step()  # expect: TG207
    opt_G.zero_grad()
    G_loss.backward()
    opt_G.step()
