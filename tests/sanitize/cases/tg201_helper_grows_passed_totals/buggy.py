# Modelled on facebookresearch/mmf#560 (https://github.com/facebookresearch/mmf/pull/560): a
# reporting helper is handed the loss dict and stores each loss tensor, graph and all. Here a
# notebook-style script hands its running totals to a helper of its own, which adds every term
# of a VAE's loss into them: the line to change is the helper's addition.
import torch
from torch import nn


class TinyVAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(16, 8)
        self.dec = nn.Linear(4, 16)

    def forward(self, x):
        mu, logvar = self.enc(x).chunk(2, dim=1)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        return self.dec(z), mu, logvar


def add_terms(acc, terms):
    for label in terms:
        acc[label] = acc.get(label, 0.0) + terms[label]  # expect: TG201


torch.manual_seed(0)
vae = TinyVAE()
opt = torch.optim.Adam(vae.parameters(), lr=1e-3)
data = torch.randn(96, 16)
totals = {}
for batch in data.split(12):
    recon, mu, logvar = vae(batch)
    terms = {"recon": (recon - batch).pow(2).mean(),
             "kl": -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).mean()}
    opt.zero_grad()
    (terms["recon"] + terms["kl"]).backward()
    opt.step()
    add_terms(totals, terms)
print({label: round(float(v), 3) for label, v in totals.items()})
