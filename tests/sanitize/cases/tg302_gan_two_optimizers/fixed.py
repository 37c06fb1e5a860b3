# Near miss for TG301-TG303: a GAN with two optimizers in the order of the DCGAN tutorial
# (https://pytorch.org/tutorials/beginner/dcgan_faces_tutorial.html): the discriminator's update
# zeroes and steps its own optimizer; the generator's loss backpropagates into the discriminator
# too, whose gradients are zeroed by the next iteration's netD.zero_grad(), not by its own step.
import torch
from torch import nn

torch.manual_seed(3)
netG = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
netD = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
optG = torch.optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999))
optD = torch.optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
bce = nn.BCEWithLogitsLoss()
real = torch.randn(64, 2) * 0.5 + 2.0

for step in range(6):
    noise = torch.randn(64, 4)
    fake = netG(noise)
    netD.zero_grad()
    err_real = bce(netD(real), torch.ones(64, 1))
    err_real.backward()
    err_fake = bce(netD(fake.detach()), torch.zeros(64, 1))
    err_fake.backward()
    optD.step()

    netG.zero_grad()
    err_g = bce(netD(fake), torch.ones(64, 1))
    err_g.backward()
    optD.zero_grad()  # clears what the generator's loss left in D: D's gradients, not G's
    optG.step()
print(f"D {(err_real + err_fake).item():.3f} G {err_g.item():.3f}")
