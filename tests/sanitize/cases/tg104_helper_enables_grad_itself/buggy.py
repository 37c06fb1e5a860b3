# Modelled on GitHub pyro-ppl/pyro#1914 (https://github.com/pyro-ppl/pyro/pull/1914): an HMC
# integrator kept the potential energy attached to the graph, tracking computations nobody needs.
# Here a Langevin sampler runs under no_grad; its gradient helper opens its own enable_grad block,
# yet the sampler also re-enables grad around the whole step, so the energies it records each
# carry a graph that no backward uses. That outer enable_grad is the line to change.
import torch
from torch import nn

torch.manual_seed(4)
energy_net = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))


def energy_grad(z):
    with torch.enable_grad():
        z = z.detach().requires_grad_(True)
        return torch.autograd.grad(energy_net(z).sum(), z)[0]


def langevin(z, steps=5):
    trace = []
    for _ in range(steps):
        with torch.enable_grad():  # expect: TG104
            z = z - 0.01 * energy_grad(z) + 0.05 * torch.randn_like(z)
            trace.append(energy_net(z).mean().item())
    return z, trace


with torch.no_grad():
    final, energies = langevin(torch.randn(8, 2))
print(tuple(final.shape), [round(e, 3) for e in energies])
