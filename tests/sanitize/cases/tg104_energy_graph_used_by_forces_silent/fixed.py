# Report: https://github.com/atomistic-machine-learning/schnetpack/issues/250
# Near-miss, must stay silent. Modelled on atomistic-machine-learning/schnetpack#250: a potential's
# forward turns grad mode on to compute forces as -dE/dpos; in eval mode it builds no graph of
# the forces (create_graph=self.training). The energy it returns still carries a grad_fn, but
# autograd.grad already ran through that graph inside forward and freed it: nothing is kept.
import torch
from torch import nn


class Potential(nn.Module):
    def __init__(self, hidden: int = 32) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, hidden), nn.SiLU(), nn.Linear(hidden, 1, bias=False))

    def forward(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.enable_grad():
            pos = pos.requires_grad_(True)
            energy = self.net(pos).sum(dim=(1, 2))
            forces = -torch.autograd.grad(energy.sum(), pos, create_graph=self.training)[0]
        return energy, forces


def validate(model: Potential, batches: list) -> float:
    model.eval()
    err = 0.0
    with torch.no_grad():
        for pos, f_true in batches:
            _, forces = model(pos.clone())
            err += (forces - f_true).abs().mean().item()
    return err / len(batches)


torch.manual_seed(7)
model = Potential()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
train = [(torch.randn(4, 6, 3), torch.randn(4, 6, 3)) for _ in range(4)]
for pos, f_true in train:
    model.train()
    _, forces = model(pos.clone())
    loss = (forces - f_true).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("force MAE", validate(model, train))
