# Modelled on ClementiGroup/mlcg#17 (https://github.com/ClementiGroup/mlcg/pull/17), "removed
# gradient computation on model parameters + detached forces": a simulation driven by a learned
# coarse-grained potential takes forces as -dE/dx with torch.autograd.grad (no backward, no
# optimizer) and records the model's energy of every step without detaching it, so each step's
# graph stays alive for the whole trajectory. Fixed twin: the recorded energy is detached.
import torch
from torch import nn


class Potential(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, 32), nn.Tanh(), nn.Linear(32, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(N, 3) bead coordinates -> () energy."""
        return self.net(x).sum() + 0.5 * (x ** 2).sum()


class LangevinSimulation:
    def __init__(self, model: nn.Module, dt: float = 0.01, friction: float = 1.0) -> None:
        self.model, self.dt, self.friction = model, dt, friction
        self.energies: list[torch.Tensor] = []

    def step(self, x: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = x.detach().requires_grad_(True)
        energy = self.model(x)
        (grad,) = torch.autograd.grad(energy, x)
        self.energies.append(energy)  # expect: TG201
        v = v - self.dt * (grad + self.friction * v) + 0.05 * torch.randn_like(v)
        return x.detach() + self.dt * v, v


torch.manual_seed(0)
potential = Potential().requires_grad_(False)
sim = LangevinSimulation(potential)
x, v = torch.randn(16, 3), torch.zeros(16, 3)
for _ in range(60):
    x, v = sim.step(x, v)
print(f"final energy {sim.energies[-1].item():.3f} over {len(sim.energies)} steps")
