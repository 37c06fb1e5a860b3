# Modelled on the GitHub issue "Expected object of scalar type Long but got scalar type Float for
# argument #2 'target'"
# (https://github.com/qubvel-org/segmentation_models.pytorch/issues/197):
# class labels read from a float array reach CrossEntropyLoss and the run dies.
import numpy as np
import torch
from torch import nn

rng = np.random.default_rng(11)
features = torch.from_numpy(rng.normal(size=(16, 4)).astype("float32"))
labels = torch.from_numpy(rng.integers(0, 3, size=16).astype("float32"))  # expect: TG402
model = nn.Linear(4, 3)
criterion = nn.CrossEntropyLoss()
loss = criterion(model(features), labels)
loss.backward()
