# Modelled on GitHub Adversarial-Deep-Learning/code-soup#69
# (https://github.com/Adversarial-Deep-Learning/code-soup/issues/69): a GAN class whose step runs
# the discriminator's real and fake backward passes one after the other and steps it, but never
# zeroes the discriminator (only the generator, before its own update). The first of the two
# backward calls adds onto the gradients of every earlier iteration and of the generator's pass
# through the discriminator: the zeroing belongs before it, at the top of the discriminator's
# step (its first forward).
import torch
from torch import nn

torch.manual_seed(0)


class GAN:
    def __init__(self) -> None:
        self.generator = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
        self.discriminator = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
        self.criterion = nn.BCEWithLogitsLoss()
        self.opt_g = torch.optim.Adam(self.generator.parameters(), lr=1e-3)
        self.opt_d = torch.optim.Adam(self.discriminator.parameters(), lr=1e-3)

    def step(self, real: torch.Tensor) -> float:
        ones, zeros = torch.ones(len(real), 1), torch.zeros(len(real), 1)
        err_real = self.criterion(self.discriminator(real), ones)  # expect: TG301
        err_real.backward()
        fake = self.generator(torch.randn(len(real), 4))
        err_fake = self.criterion(self.discriminator(fake.detach()), zeros)
        err_fake.backward()
        self.opt_d.step()

        self.generator.zero_grad()
        err_g = self.criterion(self.discriminator(fake), ones)
        err_g.backward()
        self.opt_g.step()
        return err_g.item()


gan = GAN()
for it in range(6):
    gan.step(torch.randn(32, 2) + 2.0)
