# Modelled on Novartis/scar#97 "Reproducibility - torch.manual_seed + numpy.random.seed"
# (https://github.com/Novartis/scar/issues/97): the training seeds torch only, while the data is
# split with numpy's global generator, so "either one alone does not make it reproducible".
# Fixed twin: numpy is seeded next to torch.
import numpy as np
import torch
from torch import nn

torch.manual_seed(0)  # expect: TG501
features = torch.randn(40, 4)
labels = (features.sum(dim=1) > 0).long()
order = np.random.permutation(len(features))  # the split changes on every run
train_idx = torch.as_tensor(order[:32])
model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(features[train_idx]), labels[train_idx])
    loss.backward()
    opt.step()
print(f"loss {loss.item():.3f}")
