# Modelled on karpathy/char-rnn#137 (https://github.com/karpathy/char-rnn/issues/137): starting
# from saved weights is initialisation, not resuming ("the semantics of init_from is that you
# initialize the params"). Here the latest weights of a first training stage are loaded back and
# fine-tuned by a new optimizer with a lower learning rate: a new stage, not a resume, so the
# weights saved alone are what it needs and nothing is reported.
import os
import tempfile

import torch
import torch.nn.functional as F
from torch import nn

LATEST = os.path.join(tempfile.mkdtemp(), "stage1.pth")


def fit(net, opt, epochs, shift, save):
    g = torch.Generator().manual_seed(2)
    for _ in range(epochs):
        for _ in range(4):
            x = torch.randn(16, 6, generator=g) + shift
            loss = F.mse_loss(net(x), x.sum(1, keepdim=True))
            opt.zero_grad()
            loss.backward()
            opt.step()
        if save:
            torch.save(net.state_dict(), LATEST)
    return loss.item()


torch.manual_seed(0)
net = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
print("stage 1", fit(net, torch.optim.Adam(net.parameters(), lr=1e-2), 3, 0.0, True))
tuned = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
tuned.load_state_dict(torch.load(LATEST, weights_only=True))
print("stage 2", fit(tuned, torch.optim.Adam(tuned.parameters(), lr=1e-4), 2, 0.5, False))
