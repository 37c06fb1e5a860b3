# Modelled on GitHub yifita/deep_cage#16 (https://github.com/yifita/deep_cage/issues/16): a loss
# term computed from a detached tensor is added to the total, which still trains every parameter
# through the other term, so nothing fails and the term silently does nothing. Here, notebook
# cells of a small VAE whose KL term reads the posterior mean through .detach().
# %%
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(8)


class TinyVAE(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(12, 16), nn.Tanh())
        self.to_mu = nn.Linear(16, 3)
        self.to_logvar = nn.Linear(16, 3)
        self.decoder = nn.Linear(3, 12)

    def forward(self, x):
        h = self.encoder(x)
        mu, logvar = self.to_mu(h), self.to_logvar(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return self.decoder(z), mu, logvar


# %%
vae = TinyVAE()
optimizer = torch.optim.Adam(vae.parameters(), lr=1e-3)
data = torch.randn(64, 12)

# %%
for epoch in range(3):
    for batch in data.split(16):
        recon, mu, logvar = vae(batch)
        recon_loss = F.mse_loss(recon, batch, reduction="sum")
        mean = mu.detach()  # expect: TG205
        kl = -0.5 * torch.sum(1 + logvar - mean.pow(2) - logvar.exp())
        loss = recon_loss + kl
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
