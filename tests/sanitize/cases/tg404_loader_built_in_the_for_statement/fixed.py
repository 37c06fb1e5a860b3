# Modelled on RasmussenLab/vamb#5 (https://github.com/RasmussenLab/vamb/issues/5): a VAE over
# contig features raises "Expected more than 1 value per channel when training" when the last
# batch of an epoch holds one sample. Here a data module builds the training DataLoader in a
# method that the epoch loop calls in its `for` statement, so no name holds the loader: it is
# gone by the time the batch fails, and the fix still belongs where it is built. The script
# catches the error and ends normally.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class ContigData:
    def __init__(self, features, batch_size):
        self.train = TensorDataset(features)
        self.batch_size = batch_size

    def train_loader(self):
        return DataLoader(self.train, batch_size=self.batch_size, shuffle=True, drop_last=True)


class VAE(nn.Module):
    def __init__(self, n_features=20, hidden=16, latent=4):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(n_features, hidden), nn.BatchNorm1d(hidden),
                                     nn.LeakyReLU())
        self.mu, self.logvar = nn.Linear(hidden, latent), nn.Linear(hidden, latent)
        self.decoder = nn.Linear(latent, n_features)

    def forward(self, x):
        h = self.encoder(x)
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        return self.decoder(z), mu, logvar


def fit(model, data, epochs=2):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(epochs):
        for (x,) in data.train_loader():
            recon, mu, logvar = model(x)
            kl = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(1).mean()
            loss = nn.functional.mse_loss(recon, x) + kl
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


torch.manual_seed(0)
data = ContigData(torch.randn(49, 20), batch_size=8)
try:
    fit(VAE(), data)
except ValueError as err:
    print(f"training stopped: {err}")
