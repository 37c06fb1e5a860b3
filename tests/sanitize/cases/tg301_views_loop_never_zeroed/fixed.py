# Report: https://github.com/yueliu1999/HSAN/issues/6
# Modelled on yueliu1999/HSAN#6 (two augmented views per epoch, their losses backpropagated one
# after the other, no zeroing anywhere): a config-driven graph trainer accumulates over the views
# on purpose but never clears the gradients, so each epoch's step also carries every earlier
# epoch's. The zeroing belongs before the views loop, where the finding is. The fixed twin zeroes
# there.
import torch
import torch.nn.functional as F
from torch import nn

CONFIG = {"nodes": 40, "features": 8, "classes": 3, "views": 2, "epochs": 5, "lr": 0.01}


class DenseGCN(nn.Module):
    def __init__(self, cfg: dict) -> None:
        super().__init__()
        self.lin1 = nn.Linear(cfg["features"], 16)
        self.lin2 = nn.Linear(16, cfg["classes"])

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        return adj @ self.lin2(F.relu(adj @ self.lin1(x)))


def augment(x: torch.Tensor, adj: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    keep = (torch.rand_like(adj) > 0.2).float()
    return x * (torch.rand_like(x) > 0.1).float(), adj * keep


torch.manual_seed(0)
x = torch.randn(CONFIG["nodes"], CONFIG["features"])
adj = (torch.rand(CONFIG["nodes"], CONFIG["nodes"]) > 0.8).float() + torch.eye(CONFIG["nodes"])
adj = adj / adj.sum(1, keepdim=True)
y = torch.randint(0, CONFIG["classes"], (CONFIG["nodes"],))
model = DenseGCN(CONFIG)
optimizer = torch.optim.Adam(model.parameters(), lr=CONFIG["lr"])
for epoch in range(CONFIG["epochs"]):
    model.train()
    optimizer.zero_grad()
    for view in range(CONFIG["views"]):
        xv, av = augment(x, adj)
        loss = F.cross_entropy(model(xv, av), y) / CONFIG["views"]
        loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
