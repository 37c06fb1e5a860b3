# Modelled on the GAN form of "Trying to backward through the graph a second time"
# (https://pytroubles.com/ru/posts/id2658-gan-v-pytorch-ispravljaem-oshibku-backward-cherez-detach):
# one generator output feeds the discriminator's loss and then the generator's; the
# discriminator's backward frees the generator's graph. The DCGAN tutorial gives D `fake.detach()`
# (https://pytorch.org/tutorials/beginner/dcgan_faces_tutorial.html), the line to change.
import torch
from torch import nn

torch.manual_seed(3)
G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
D = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
opt_g = torch.optim.Adam(G.parameters(), lr=2e-4)
opt_d = torch.optim.Adam(D.parameters(), lr=2e-4)
bce = nn.BCEWithLogitsLoss()
ones, zeros = torch.ones(8, 1), torch.zeros(8, 1)

for step in range(3):
    real = torch.randn(8, 2)
    fake = G(torch.randn(8, 4))
    opt_d.zero_grad()
    d_loss = bce(D(real), ones) + bce(D(fake), zeros)  # expect: TG202
    d_loss.backward()
    opt_d.step()
    opt_g.zero_grad()
    g_loss = bce(D(fake), ones)
    g_loss.backward()
    opt_g.step()
