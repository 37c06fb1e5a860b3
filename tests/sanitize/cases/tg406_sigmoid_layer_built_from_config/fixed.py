# Report: https://github.com/lopuhin/kaggle-imet-2019/issues/3
# Modelled on GitHub lopuhin/kaggle-imet-2019#3 ("Sigmoid before BCEWithLogitsLoss"): a
# multi-label tagger is assembled from a config whose output activation is "sigmoid", while the
# criterion is BCEWithLogitsLoss, which applies the sigmoid again; predictions stay within
# (0.5, 0.73).
import torch
from torch import nn

CONFIG = {"layers": [20, 48, 6], "activation": "relu", "output": "logits", "lr": 1e-2}
ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh}


def build(config: dict) -> nn.Module:
    sizes = config["layers"]
    layers: list[nn.Module] = []
    for n_in, n_out in zip(sizes[:-2], sizes[1:-1]):
        layers += [nn.Linear(n_in, n_out), ACTIVATIONS[config["activation"]]()]
    layers.append(nn.Linear(sizes[-2], sizes[-1]))
    if config["output"] == "sigmoid":
        layers.append(nn.Sigmoid())
    return nn.Sequential(*layers)


torch.manual_seed(2)
model = build(CONFIG)
optimizer = torch.optim.SGD(model.parameters(), lr=CONFIG["lr"])
criterion = nn.BCEWithLogitsLoss()
x, y = torch.randn(64, 20), (torch.rand(64, 6) > 0.7).float()
for step in range(5):
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
