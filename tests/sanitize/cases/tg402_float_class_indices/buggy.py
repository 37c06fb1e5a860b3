# Modelled on the forum thread "RuntimeError: expected scalar type Long but found Float"
# (https://discuss.pytorch.org/t/runtimeerror-expected-scalar-type-long-but-found-float/103299):
# class labels read from a float array reach CrossEntropyLoss and the run dies.
import numpy as np
import torch
from torch import nn

rng = np.random.default_rng(11)
features = torch.from_numpy(rng.normal(size=(16, 4)).astype("float32"))
labels = torch.from_numpy(rng.integers(0, 3, size=16).astype("float32"))
model = nn.Linear(4, 3)
criterion = nn.CrossEntropyLoss()
loss = criterion(model(features), labels)  # expect: TG402
loss.backward()
