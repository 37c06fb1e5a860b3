# Modelled on the GitHub issue "No normalization for LinearRegression causes infinite values"
# (https://github.com/blackportal-ai/delta/issues/248): house-price-like features on scales of
# hundreds, a learning rate taken from a config block, and plain SGD: the loss grows by orders
# of magnitude each step until it overflows to inf and then NaN.
import torch
from torch import nn

SETTINGS = {
    "hidden": 8,
    "learning_rate": 1e-4,  # expect: TG405
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
