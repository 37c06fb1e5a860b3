# Fixed twin of buggy.py (https://github.com/blackportal-ai/delta/issues/248): a learning rate
# small enough for features on these scales keeps SGD stable.
import torch
from torch import nn

SETTINGS = {
    "hidden": 8,
    "learning_rate": 1e-7,
    "steps": 40,
}


def build(settings):
    model = nn.Sequential(nn.Linear(3, settings["hidden"]), nn.Linear(settings["hidden"], 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=settings["learning_rate"])
    return model, optimizer


torch.manual_seed(2)
features = torch.rand(128, 3) * torch.tensor([300.0, 120.0, 900.0])
prices = features @ torch.tensor([2.0, 5.0, 0.5]) + 100.0
model, optimizer = build(SETTINGS)
for step in range(SETTINGS["steps"]):
    loss = nn.functional.mse_loss(model(features).squeeze(-1), prices)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("final loss", loss.item())
