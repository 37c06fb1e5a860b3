# Report: https://github.com/isayev/ReLeaSE/issues/39
# Modelled on isayev/ReLeaSE#39 ("my weights don't seem to be changing": a value computed from
# the trained weights went through `.detach().numpy()` before it reached the loss, so their grad
# stayed None). Here an equalizer's learnable band gains are kept non-negative with a NumPy op in
# a helper; the module holding them is never called, and the tensor rebuilt from the array has
# no graph back to the gains, so only the read-out head learns.
import numpy as np
import torch
from torch import nn

torch.manual_seed(0)


class Equalizer(nn.Module):
    def __init__(self, bands):
        super().__init__()
        self.gains = nn.Parameter(torch.ones(bands))


def band_gains(eq):
    g = eq.gains.detach().numpy()  # expect: TG205
    return torch.tensor(np.abs(g))


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
