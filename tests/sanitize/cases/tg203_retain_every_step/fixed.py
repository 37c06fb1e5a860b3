# Fixed twin of buggy.py (https://pytorch.org/docs/stable/generated/torch.Tensor.backward.html):
# no retain_graph. Near-miss that must stay silent: a GAN-style step where the generator's output is
# backpropagated by the discriminator's loss with retain_graph=True and again by the generator's
# loss in the same iteration.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(16)
generator = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 6))
critic = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 1))
opt_g = torch.optim.Adam(generator.parameters(), lr=1e-3)
opt_c = torch.optim.Adam(critic.parameters(), lr=1e-3)

for step in range(4):
    real = torch.randn(16, 6)
    fake = generator(torch.randn(16, 4))
    critic_loss = F.softplus(critic(fake)).mean() + F.softplus(-critic(real)).mean()
    opt_c.zero_grad()
    critic_loss.backward(retain_graph=True)
    opt_c.step()
    generator_loss = F.softplus(-critic(fake)).mean()
    opt_g.zero_grad()
    generator_loss.backward()
    opt_g.step()
