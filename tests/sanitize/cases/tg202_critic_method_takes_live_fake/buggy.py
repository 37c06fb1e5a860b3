# Report: https://github.com/pytorch/examples/issues/116
# Modelled on GitHub pytorch/examples#116 (a DCGAN written without `.detach()` on the fake batch
# died with "Trying to backward through the graph a second time"): a conditional GAN for sensor
# traces, written as a trainer class. The critic's update is its own method, which scores the
# generated traces as they are; its backward frees the generator's graph, so the generator's
# update, a method called after it, fails. The line to change is the critic's call on the traces.
import torch
import torch.nn.functional as F
from torch import nn


class TraceGAN:
    def __init__(self) -> None:
        self.generator = nn.Sequential(nn.Linear(12, 32), nn.Tanh(), nn.Linear(32, 24))
        self.critic = nn.Sequential(nn.Linear(28, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
        self.opt_g = torch.optim.Adam(self.generator.parameters(), lr=1e-3)
        self.opt_c = torch.optim.Adam(self.critic.parameters(), lr=1e-3)

    def update_critic(self, real, condition):
        real_score = self.critic(torch.cat([real, condition], dim=1))
        fake_score = self.critic(torch.cat([self.generated, condition], dim=1))  # expect: TG202
        self.critic_loss = (F.softplus(-real_score) + F.softplus(fake_score)).mean()
        self.opt_c.zero_grad()
        self.critic_loss.backward()
        self.opt_c.step()

    def update_generator(self, condition):
        fake_score = self.critic(torch.cat([self.generated, condition], dim=1))
        self.generator_loss = F.softplus(-fake_score).mean()
        self.opt_g.zero_grad()
        self.generator_loss.backward()
        self.opt_g.step()

    def train_batch(self, real, condition):
        noise = torch.randn(real.shape[0], 8)
        self.generated = self.generator(torch.cat([noise, condition], dim=1))
        self.update_critic(real, condition)
        self.update_generator(condition)


torch.manual_seed(3)
gan = TraceGAN()
for batch in range(4):
    condition = torch.randn(16, 4)
    real = torch.sin(torch.linspace(0, 6, 24) + condition[:, :1])
    gan.train_batch(real, condition)
print(f"critic {gan.critic_loss.item():.3f} generator {gan.generator_loss.item():.3f}")
