# Modelled on MILVLG/mcan-vqa#26 (https://github.com/MILVLG/mcan-vqa/issues/26): net.train() is
# called before the epoch loop and the per-epoch evaluation puts the network in eval mode, so later
# epochs would train with Dropout off. Written with callbacks: fit() calls model.train() once,
# sums the batch losses with a generator expression, then runs the epoch-end callbacks, one of
# which scores a small VAE's reconstruction in eval mode to keep the best weights. The train()
# that runs once is the line to move into the loop.
import copy

import torch
from torch import nn
import torch.nn.functional as F


class VAE(nn.Module):
    def __init__(self, dim: int = 10, hidden: int = 16, latent: int = 2) -> None:
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(dim, hidden), nn.BatchNorm1d(hidden), nn.ReLU())
        self.mu, self.logvar = nn.Linear(hidden, latent), nn.Linear(hidden, latent)
        self.dec = nn.Sequential(nn.Linear(latent, hidden), nn.ReLU(), nn.Dropout(0.1),
                                 nn.Linear(hidden, dim))

    def forward(self, x: torch.Tensor) -> tuple:
        h = self.enc(x)
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        return self.dec(z), mu, logvar


def vae_loss(out: tuple, x: torch.Tensor) -> torch.Tensor:
    recon, mu, logvar = out
    kl = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(1).mean()
    return F.mse_loss(recon, x) + 0.01 * kl


class KeepBest:
    def __init__(self, held_out: torch.Tensor) -> None:
        self.held_out, self.best, self.state = held_out, float("inf"), None

    def on_epoch_end(self, trainer: "Fit") -> None:
        trainer.model.eval()
        with torch.no_grad():
            score = vae_loss(trainer.model(self.held_out), self.held_out).item()
        if score < self.best:
            self.best, self.state = score, copy.deepcopy(trainer.model.state_dict())


class Fit:
    def __init__(self, model: nn.Module, callbacks: list) -> None:
        self.model, self.callbacks = model, callbacks
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    def step(self, x: torch.Tensor) -> float:
        loss = vae_loss(self.model(x), x)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def __call__(self, data: torch.Tensor, epochs: int) -> None:
        self.model.train()
        for epoch in range(epochs):  # expect: TG102
            total = sum(self.step(x) for x in data.split(8))
            print(epoch, total)
            for callback in self.callbacks:
                callback.on_epoch_end(self)


torch.manual_seed(0)
data = torch.randn(32, 10)
Fit(VAE(), [KeepBest(torch.randn(16, 10))])(data, epochs=3)
