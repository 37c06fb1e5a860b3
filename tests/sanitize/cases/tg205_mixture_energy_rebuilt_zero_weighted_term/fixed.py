# Report: https://github.com/mperezcarrasco/PyTorch-DAGMM/issues/4
# Modelled on mperezcarrasco/PyTorch-DAGMM#4 (the estimation network of a deep Gaussian mixture
# did not learn). The per-sample energies are computed one by one, turned into floats with
# .item() and packed into a new tensor, so the membership head's only live path to the loss is a
# covariance penalty whose weight is 0 in the config: its gradients are zeros, never None.
import math

import torch
from torch import nn

torch.manual_seed(0)
config = {"latent": 2, "components": 3, "lambda_energy": 0.1, "lambda_cov": 0.0, "steps": 6}


class Mixture(nn.Module):
    def __init__(self, n_features: int) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(n_features, 8), nn.Tanh(), nn.Linear(8, config["latent"]))
        self.decoder = nn.Sequential(nn.Linear(config["latent"], 8), nn.Tanh(), nn.Linear(8, n_features))
        self.membership = nn.Sequential(nn.Linear(config["latent"], 8), nn.Tanh(),
                                        nn.Linear(8, config["components"]), nn.Softmax(dim=1))

    def forward(self, x):
        z = self.encoder(x)
        return z, self.decoder(z), self.membership(z)


def mixture_params(z, gamma):
    weight = gamma.sum(0)
    phi = weight / len(z)
    mu = (gamma.unsqueeze(-1) * z.unsqueeze(1)).sum(0) / weight.unsqueeze(-1)
    diff = z.unsqueeze(1) - mu
    var = (gamma.unsqueeze(-1) * diff ** 2).sum(0) / weight.unsqueeze(-1) + 1e-3
    return phi, mu, var


def energy(z_i, phi, mu, var):
    log_p = torch.log(phi) - 0.5 * (((z_i - mu) ** 2) / var + torch.log(2 * math.pi * var)).sum(-1)
    return -torch.logsumexp(log_p, 0)


model = Mixture(6)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(config["steps"]):
    x = torch.randn(32, 6)
    z, x_hat, gamma = model(x)
    phi, mu, var = mixture_params(z, gamma)
    energies = torch.stack([energy(z_i, phi, mu, var) for z_i in z])
    penalty = (1.0 / var).sum()
    loss = ((x - x_hat) ** 2).mean() + config["lambda_energy"] * energies.mean() \
        + config["lambda_cov"] * penalty
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("loss", round(loss.item(), 4))
