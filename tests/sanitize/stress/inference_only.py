"""An inference loop: 1,500 batches through a model under ``torch.no_grad()`` and
``torch.inference_mode()``, no backward and no optimizer (a prediction script)."""

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                      nn.Linear(8, 10))
model.eval()
counts = torch.zeros(10, dtype=torch.long)
with torch.no_grad():
    for i in range(1000):
        counts += torch.bincount(model(torch.randn(4, 3, 16, 16)).argmax(1), minlength=10)
with torch.inference_mode():
    for i in range(500):
        counts += torch.bincount(model(torch.randn(4, 3, 16, 16)).argmax(1), minlength=10)
print(counts.tolist())
