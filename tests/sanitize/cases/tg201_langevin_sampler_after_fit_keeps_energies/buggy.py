# Report: https://github.com/sbi-dev/sbi/issues/198
# Modelled on GitHub sbi-dev/sbi#198 ("RAM filling up during sampling", traced to a missing
# .detach() in the sampling loop run after training): an energy model of a 2-D density is fitted
# with an optimizer, then Langevin dynamics draws samples from it, taking the score with
# torch.autograd.grad (no backward, no optimizer step in the sampler). The sampler logs each
# step's energy tensor into a trace dict, so every step's graph through the model stays alive.
import torch
from torch import nn


def fit(energy_net, steps=30):
    opt = torch.optim.SGD(energy_net.parameters(), lr=0.05)
    for _ in range(steps):
        x = torch.randn(64, 2)
        loss = (energy_net(x).squeeze(1) - 0.5 * (x ** 2).sum(1)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def langevin(energy_net, x, n_steps, step_size=1e-2):
    trace = {"energy": [], "norm": []}
    for _ in range(n_steps):
        x = x.detach().requires_grad_(True)
        energy = energy_net(x).sum()
        (score,) = torch.autograd.grad(energy, x)
        x = x - step_size * score + (2 * step_size) ** 0.5 * torch.randn_like(x)
        trace["energy"].append(energy)  # expect: TG201
        trace["norm"].append(x.norm().item())
    return x.detach(), trace


torch.manual_seed(2)
energy_net = nn.Sequential(nn.Linear(2, 32), nn.Softplus(), nn.Linear(32, 1))
fit(energy_net)
samples, trace = langevin(energy_net, torch.randn(128, 2), n_steps=80)
print(f"mean energy {sum(float(e) for e in trace['energy']) / len(trace['energy']):.3f}")
