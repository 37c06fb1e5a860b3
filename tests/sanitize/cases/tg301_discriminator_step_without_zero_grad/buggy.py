# Modelled on Project-MONAI/GenerativeModels#102 (https://github.com/Project-MONAI/GenerativeModels/issues/102),
# "Missing zero_grad in the VQGAN tutorial": the autoencoder's adversarial loss is backpropagated
# through the discriminator (which adds to the discriminator's gradients), and the discriminator's
# own step never zeroes its optimizer, so it steps on its previous gradients plus the generator's.
# Its zero_grad belongs in the discriminator's step, which starts at its forward (reported
# there; right before its backward is as good).
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(6)

autoencoder = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 1, 3, padding=1))
discriminator = nn.Sequential(nn.Conv2d(1, 4, 3, stride=2), nn.LeakyReLU(0.2), nn.Flatten(),
                              nn.Linear(4 * 3 * 3, 1))
opt_g = torch.optim.Adam(autoencoder.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(discriminator.parameters(), lr=1e-3)


def train_epoch(images):
    for i in range(0, len(images), 4):
        x = images[i:i + 4]
        opt_g.zero_grad(set_to_none=True)
        recon = autoencoder(x)
        adv = F.softplus(-discriminator(recon)).mean()
        loss_g = F.l1_loss(recon, x) + 0.1 * adv
        loss_g.backward()
        opt_g.step()

        logits_fake = discriminator(recon.detach())  # expect: TG301
        logits_real = discriminator(x)
        loss_d = 0.5 * (F.softplus(logits_fake).mean() + F.softplus(-logits_real).mean())
        loss_d.backward()
        opt_d.step()
    return loss_g.item(), loss_d.item()


images = torch.rand(16, 1, 8, 8)
for epoch in range(3):
    print(epoch, train_epoch(images))
