# Modelled on the PyTorch forum thread "RuntimeError: Trying to backward through the graph a
# second time" (https://discuss.pytorch.org/t/runtimeerror-trying-to-backward-through-the-graph-
# a-second-time-but-the-buffers-have-already-been-freed-specify-retain-graph-true-when-calling-
# backward-the-first-time/6795), in a WGAN's form: the generator's loss reuses the critic's score
# of the fake batch that the critic's own backward already went through. The first backward took
# the score in through torch.mean, no module that could be given it detached, so the line to
# change is the generator's loss, which must score the fake batch again.
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
    fake_validity = critic(fake)
    opt_d.zero_grad()
    loss_d = -torch.mean(critic(real)) + torch.mean(fake_validity)
    loss_d.backward()
    opt_d.step()
    opt_g.zero_grad()
    loss_g = -torch.mean(fake_validity)
    loss_g.backward()  # expect: TG202
    opt_g.step()
