# Look-alike for TG103, modelled on torchmd/torchmd-net#211
# (https://github.com/torchmd/torchmd-net/issues/211): "TorchMD-Net models require to run
# backwards as part of forwards to compute forces from energies". The potential's forward takes
# the energy's gradient with respect to the positions, so its evaluation cannot run under
# torch.no_grad(): the forces it returns carry no graph (create_graph=False), and nothing is
# kept for nothing. Evaluation with grad enabled is right here.
import torch
from torch import nn


class Potential(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Dropout(0.1), nn.Linear(16, 1))

    def forward(self, pos, create_graph=False):
        pos = pos.requires_grad_(True)
        dist = (pos[:, :, None] - pos[:, None, :]).norm(dim=-1)[:, 0, 1:].unsqueeze(-1)
        energy = self.mlp(dist).sum((1, 2))
        forces = -torch.autograd.grad(energy.sum(), pos, create_graph=create_graph)[0]
        return energy, forces


torch.manual_seed(0)
pos, ref_e, ref_f = torch.randn(32, 4, 3), torch.randn(32), torch.randn(32, 4, 3)
model = Potential()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(5):
    model.train()
    energy, forces = model(pos.clone(), create_graph=True)
    loss = ((energy - ref_e) ** 2).mean() + ((forces - ref_f) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

model.eval()
energy, forces = model(pos.clone())
force_mae = (forces - ref_f).abs().mean().item()
energy_mae = (energy.detach() - ref_e).abs().mean().item()
print(f"energy MAE {energy_mae:.3f}, force MAE {force_mae:.3f}")
