# Modelled on GitHub facebookresearch/fairchem#199
# (https://github.com/facebookresearch/fairchem/pull/199): validation used more memory than
# training because the prediction helper it calls turns grad mode back on, so every validation
# batch inside torch.no_grad() still builds (and keeps) an autograd graph.
import torch
import torch.nn.functional as F
from torch import nn


class EnergyModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(9, 32), nn.SiLU(), nn.Linear(32, 1))

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return self.net(positions.flatten(1))


@torch.set_grad_enabled(True)  # expect: TG104
def predict(model: nn.Module, positions: torch.Tensor) -> torch.Tensor:
    return model(positions)


def on_validation_end(model: nn.Module, batches) -> float:
    model.eval()
    kept = []
    with torch.no_grad():
        for positions, energy in batches:
            kept.append(predict(model, positions))
    errors = [F.l1_loss(p, e).item() for p, (_, e) in zip(kept, batches)]
    model.train()
    return sum(errors) / len(errors)


torch.manual_seed(7)
model = EnergyModel()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
train = [(torch.randn(16, 3, 3), torch.randn(16, 1)) for _ in range(4)]
val = [(torch.randn(16, 3, 3), torch.randn(16, 1)) for _ in range(3)]
for epoch in range(2):
    for positions, energy in train:
        optimizer.zero_grad()
        F.mse_loss(model(positions), energy).backward()
        optimizer.step()
    print(epoch, on_validation_end(model, val))
