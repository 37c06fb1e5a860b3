# Modelled on alterzero/DBPN-Pytorch#37 (https://github.com/alterzero/DBPN-Pytorch/issues/37):
# "When training the discriminator, detach the output tensor of generator?". The discriminator's
# loss is computed on the generator's output without detach, so its backward frees the
# generator's graph and the generator's backward then raises "Trying to backward through the
# graph a second time". The script catches the error around its training function and ends
# normally with a log line, so the finding is reported at exit, at the line to change.
import torch
import torch.nn.functional as F
from torch import nn


def train(G, D, steps=6):
    opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
    for it in range(steps):
        real = torch.randn(16, 4)
        fake = G(torch.randn(16, 8))
        opt_d.zero_grad()
        d_loss = F.softplus(-D(real)).mean() + F.softplus(D(fake)).mean()  # expect: TG202
        d_loss.backward()
        opt_d.step()
        opt_g.zero_grad()
        g_loss = F.softplus(-D(fake)).mean()
        g_loss.backward()
        opt_g.step()


torch.manual_seed(0)
try:
    train(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)),
          nn.Sequential(nn.Linear(4, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1)))
except RuntimeError as err:
    print(f"training stopped: {str(err).splitlines()[0][:60]}")
