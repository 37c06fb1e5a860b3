# Fixed twin of buggy.py (the PyTorch forum thread on a second backward through a freed graph):
# the critic scores the fake batch detached for its own loss, and again for the generator's.
import torch
from torch import nn

torch.manual_seed(0)
generator = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
critic = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 1))
opt_g = torch.optim.RMSprop(generator.parameters(), lr=5e-5)
opt_d = torch.optim.RMSprop(critic.parameters(), lr=5e-5)

for step in range(3):
    real = torch.randn(8, 2)
    fake = generator(torch.randn(8, 4))
    fake_validity = critic(fake.detach())
    opt_d.zero_grad()
    loss_d = -torch.mean(critic(real)) + torch.mean(fake_validity)
    loss_d.backward()
    opt_d.step()
    opt_g.zero_grad()
    loss_g = -torch.mean(critic(fake))
    loss_g.backward()
    opt_g.step()
