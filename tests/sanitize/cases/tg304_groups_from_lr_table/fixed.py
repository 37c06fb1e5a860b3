# Report: https://github.com/ACEsuit/mace/pull/1529
# Modelled on ACEsuit/mace#1529 ("Register all parameters in optimizer groups explicitly": a
# trainable submodule that no parameter group claims never receives optimizer updates): the
# groups are generated from a table of submodule names and learning rates, and the readout
# added to the model is not in the table, so it keeps its initial weights. The finding is at the
# table, where its entry belongs. Fixed twin: the table names the readout too.
import torch
import torch.nn.functional as F
from torch import nn


class Potential(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Linear(6, 32)
        self.interactions = nn.Sequential(nn.Linear(32, 32), nn.SiLU(), nn.Linear(32, 32))
        self.readout = nn.Linear(32, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.readout(self.interactions(F.silu(self.embedding(x))))


def make_optimizer(model: nn.Module, base_lr: float) -> torch.optim.Optimizer:
    rates = {"embedding": base_lr,
             "interactions": base_lr * 0.5,
             "readout": base_lr}
    groups = [{"params": list(getattr(model, name).parameters()), "lr": lr}
              for name, lr in rates.items()]
    return torch.optim.Adam(groups)


torch.manual_seed(0)
model = Potential()
optimizer = make_optimizer(model, 1e-3)
for _ in range(6):
    x = torch.randn(32, 6)
    loss = F.mse_loss(model(x), x.pow(2).sum(1, keepdim=True))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.4f}")
