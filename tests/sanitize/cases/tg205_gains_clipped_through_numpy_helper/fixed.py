# Fixed twin of buggy.py (https://github.com/isayev/ReLeaSE/issues/39): the gains are kept
# non-negative with a torch op, so the loss reaches them.
import torch
from torch import nn

torch.manual_seed(0)


class Equalizer(nn.Module):
    def __init__(self, bands):
        super().__init__()
        self.gains = nn.Parameter(torch.ones(bands))


def band_gains(eq):
    return eq.gains.abs()


eq = Equalizer(16)
head = nn.Linear(16, 1)
opt = torch.optim.Adam(list(eq.parameters()) + list(head.parameters()), lr=0.05)
spectra = torch.rand(64, 16)
loudness = (spectra * torch.linspace(0.5, 1.5, 16)).sum(1, keepdim=True)
for step in range(12):
    shaped = spectra * band_gains(eq)
    loss = nn.functional.mse_loss(head(shaped), loudness)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"final loss {loss.item():.4f}")
