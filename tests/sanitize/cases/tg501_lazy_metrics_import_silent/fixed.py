# Near miss for TG501, from pytorch/examples' MNIST script
# (https://github.com/pytorch/examples/blob/main/mnist/main.py): it seeds torch alone
# (torch.manual_seed(args.seed)) and never draws from Python's random. Its evaluation imports a
# metrics library lazily, inside the function, the first time it runs; that library's top-level
# code draws from random once at import (as rich's style module does, which scikit-learn's
# metrics import). A library's import-time draw changes neither the data order nor the weights:
# the run is as reproducible as PyTorch's notes ask
# (https://pytorch.org/docs/stable/notes/randomness.html), and must stay silent.
import os
import sys

import torch
from torch import nn

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "site-packages"))

torch.manual_seed(1)


def evaluate(model, features, labels):
    from tg501_metricstub import macro_f1

    model.eval()
    with torch.no_grad():
        predictions = model(features).argmax(1)
    return macro_f1(labels.tolist(), predictions.tolist(), classes=3)


features = torch.randn(96, 4)
labels = features[:, :3].argmax(1)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(features, labels),
                                     batch_size=16, shuffle=True)
model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    model.train()
    for x, y in loader:
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    print("epoch", epoch, "macro F1", evaluate(model, features, labels))
