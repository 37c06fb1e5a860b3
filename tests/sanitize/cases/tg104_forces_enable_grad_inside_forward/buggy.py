# Report: https://github.com/facebookresearch/fairchem/pull/199
# Modelled on facebookresearch/fairchem#199 ("validation memory usage is higher than training"):
# an interatomic potential predicts forces as the negative gradient of its energy, so its forward
# turns grad mode back on with `torch.enable_grad()` to call autograd.grad. The validation loop
# runs under torch.no_grad(), but the forward returns the energy and forces with their graphs
# (create_graph=True even in eval mode), so every validation batch builds a graph. (The last
# layer has no bias: a constant energy offset has no force, so it would never get a gradient.)
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
            forces = -torch.autograd.grad(energy.sum(), pos, create_graph=True)[0]  # expect: TG104
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
