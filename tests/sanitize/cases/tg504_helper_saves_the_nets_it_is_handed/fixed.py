# Report: https://github.com/mlangguth89/downscaling_benchmark/issues/37
# Fixed twin: both optimizers are handed to the snapshot beside the networks.
import os
import tempfile

import torch
from torch import nn


class GanTrainer:
    def __init__(self, noise_dim: int = 4) -> None:
        self.noise_dim = noise_dim
        self.gen = nn.Sequential(nn.Linear(noise_dim, 16), nn.ReLU(), nn.Linear(16, 2))
        self.critic = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 1))
        self.opt_g = torch.optim.Adam(self.gen.parameters(), lr=1e-3, betas=(0.5, 0.9))
        self.opt_c = torch.optim.Adam(self.critic.parameters(), lr=1e-3, betas=(0.5, 0.9))

    def _snapshot(self, path: str, epoch: int, *parts: object) -> None:
        states = {f"part{i}": part.state_dict() for i, part in enumerate(parts)}
        torch.save({"epoch": epoch, **states}, path)

    def _round(self, real: torch.Tensor) -> None:
        fake = self.gen(torch.randn(len(real), self.noise_dim))
        critic_loss = self.critic(fake.detach()).mean() - self.critic(real).mean()
        self.opt_c.zero_grad()
        critic_loss.backward()
        self.opt_c.step()
        gen_loss = -self.critic(fake).mean()
        self.opt_g.zero_grad()
        gen_loss.backward()
        self.opt_g.step()

    def fit(self, real: torch.Tensor, epochs: int, folder: str) -> None:
        for epoch in range(epochs):
            self._round(real)
            path = os.path.join(folder, "wgan.pt")
            self._snapshot(path, epoch, self.gen, self.critic,
                           self.opt_g, self.opt_c)


torch.manual_seed(5)
with tempfile.TemporaryDirectory() as folder:
    GanTrainer().fit(torch.randn(32, 2) * 0.5 + 1.0, epochs=3, folder=folder)
