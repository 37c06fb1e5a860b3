# Modelled on GitHub KupynOrest/DeblurGAN#56
# (https://github.com/KupynOrest/DeblurGAN/issues/56, "Backward twice when using wgan-gp as
# critic"): a deblurring GAN restores the batch once per generator step and updates its WGAN-GP
# critic several times on that restored batch. The critic's adversarial term takes the restored
# images detached, but the gradient penalty is given them whole, so the first critic backward
# frees the generator's graph and the second one runs into it.
# Here, random blurred/sharp pairs.
import torch
from torch import nn

torch.manual_seed(5)


def penalty(critic, sharp, restored, weight=10.0):
    alpha = torch.rand(sharp.size(0), 1, 1, 1)
    mixed = (alpha * sharp + (1 - alpha) * restored).requires_grad_(True)
    grad, = torch.autograd.grad(critic(mixed).sum(), mixed, create_graph=True)
    return weight * ((grad.flatten(1).norm(dim=1) - 1) ** 2).mean()


restorer = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 3, 3, padding=1))
critic = nn.Sequential(nn.Conv2d(3, 16, 4, stride=2, padding=1), nn.LeakyReLU(0.2),
                       nn.Flatten(), nn.Linear(16 * 8 * 8, 1))
opt_g = torch.optim.Adam(restorer.parameters(), lr=1e-4, betas=(0.5, 0.9))
opt_c = torch.optim.Adam(critic.parameters(), lr=1e-4, betas=(0.5, 0.9))
for it in range(3):
    sharp = torch.rand(6, 3, 16, 16) * 2 - 1
    blurred = nn.functional.avg_pool2d(sharp, 3, stride=1, padding=1)
    restored = restorer(blurred)
    for _ in range(3):  # critic updates per generator update
        opt_c.zero_grad()
        wasserstein = critic(restored.detach()).mean() - critic(sharp).mean()
        gp = penalty(critic, sharp, restored.detach())
        (wasserstein + gp).backward()
        opt_c.step()
    opt_g.zero_grad()
    g_loss = -critic(restored).mean() + 100 * (restored - sharp).abs().mean()
    g_loss.backward()
    opt_g.step()
