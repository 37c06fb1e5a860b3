# Fixed twin: the derivative keeps its graph only in training (create_graph=self.training), and
# what validation keeps is detached.
import torch
from torch import nn

torch.manual_seed(11)


class Representation(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Sequential(nn.Linear(3, 24), nn.Tanh(), nn.Linear(24, 24), nn.Tanh())

    def forward(self, r: torch.Tensor) -> torch.Tensor:
        return self.embed(r)


class EnergyAndForces(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.atomwise = nn.Linear(24, 1, bias=False)
        self.create_graph = True

    def forward(self, rep: nn.Module, r: torch.Tensor) -> dict:
        with torch.enable_grad():
            r = r.detach().requires_grad_(True)
            energy = self.atomwise(rep(r)).sum(dim=(1, 2))
            dedr = torch.autograd.grad(
                energy, r, grad_outputs=torch.ones_like(energy), create_graph=self.training)[0]
        if not self.training:
            energy, dedr = energy.detach(), dedr.detach()
        return {"energy": energy, "forces": -dedr}


class Potential(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rep, self.out = Representation(), EnergyAndForces()

    def forward(self, r: torch.Tensor) -> dict:
        return self.out(self.rep, r)


def validation_mae(model: Potential, batches: list) -> float:
    model.eval()
    kept, err = [], 0.0
    with torch.no_grad():
        for r, f_ref in batches:
            pred = model(r)
            kept.append(pred["energy"])
            err += (pred["forces"] - f_ref).abs().mean().item()
    model.train()
    return err / len(batches)


model = Potential()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
train = [(torch.randn(8, 5, 3), torch.randn(8, 5, 3)) for _ in range(3)]
for r, f_ref in train:
    loss = (model(r)["forces"] - f_ref).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("val force MAE", validation_mae(model, train[:2]))
