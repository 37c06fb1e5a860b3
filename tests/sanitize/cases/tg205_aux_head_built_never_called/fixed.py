# Modelled on GitHub ImprintLab/MedSegDiff#27 (https://github.com/ImprintLab/MedSegDiff/issues/27,
# "parameters that were not used in producing loss": a layer defined in __init__ but not used in
# forward): a head built from the configuration is never called in forward, so its parameters
# sit in the optimizer without ever receiving a gradient. Config-driven: the auxiliary head is
# built whenever the config names it.
import torch
import torch.nn.functional as F
from torch import nn

CONFIG = {"hidden": 24, "classes": 3, "aux_classes": 5, "lr": 0.05, "steps": 8}


class MultiTaskNet(nn.Module):
    def __init__(self, cfg: dict) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(6, cfg["hidden"]), nn.ReLU())
        self.main_head = nn.Linear(cfg["hidden"], cfg["classes"])
        self.aux_head = nn.Linear(cfg["hidden"], cfg["aux_classes"])

    def forward(self, x: torch.Tensor) -> dict:
        h = self.trunk(x)
        return {"main": self.main_head(h), "aux": self.aux_head(h)}


def train(cfg: dict) -> None:
    model = MultiTaskNet(cfg)
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg["lr"])
    for _ in range(cfg["steps"]):
        x = torch.randn(16, 6)
        y = torch.randint(0, cfg["classes"], (16,))
        out = model(x)
        loss = F.cross_entropy(out["main"], y) + 0.1 * out["aux"].pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


torch.manual_seed(12)
train(CONFIG)
