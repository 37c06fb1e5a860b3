# Modelled on TIML-Group/Robust-MoE-Dual-Model#2 (https://github.com/TIML-Group/Robust-MoE-Dual-Model/issues/2):
# a top-1 mixture of experts whose forward loops over its experts and calls each only on the rows
# the router sent to it, scaled by the gate probability. Here the router has collapsed onto the
# first experts (the last one's logit starts far below the others, as after a load-imbalanced
# run), so expert 3 is never called and its parameters never get a gradient: a routing outcome,
# not a cut path, and nothing to report.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(3)


class Expert(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.fc(x))


class Top1MoE(nn.Module):
    def __init__(self, dim: int = 16, n_experts: int = 4) -> None:
        super().__init__()
        self.router = nn.Linear(dim, n_experts)
        with torch.no_grad():
            self.router.bias[-1] = -50.0
        self.experts = nn.ModuleList(Expert(dim) for _ in range(n_experts))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        probs = self.router(x).softmax(-1)
        top_p, top_idx = probs.max(-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            sel = top_idx == e
            if sel.any():
                out[sel] = expert(x[sel]) * top_p[sel, None]
        return out


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.moe = Top1MoE()
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.moe(x))


model = Classifier()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
for step in range(12):
    x = torch.randn(32, 16)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
