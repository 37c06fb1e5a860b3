# Modelled on GitHub salaniz/pytorch-gve-lrcn#16 (https://github.com/salaniz/pytorch-gve-lrcn/issues/16):
# a captioning run's set_seed() seeds torch and switches cuDNN to deterministic, but the reference
# caption used for each image is picked with numpy's global generator, which nothing seeds, so two
# runs with the same seed train on different captions.
import numpy as np
import torch
from torch import nn


def set_seed(seed: int) -> None:
    torch.manual_seed(seed)  # expect: TG501
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


set_seed(42)
features = torch.randn(32, 8)
captions = torch.randint(0, 10, (32, 5))
model = nn.Linear(8, 10)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    choice = torch.from_numpy(np.random.randint(0, 5, size=32))
    target = captions[torch.arange(32), choice]
    loss = nn.functional.cross_entropy(model(features), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
