# Modelled on pytorch/examples' time_sequence_prediction
# (https://github.com/pytorch/examples/blob/main/time_sequence_prediction/train.py): a script
# generates sine waves as a NumPy array, stores them with torch.save, and the training script
# reads them back with torch.load. Since PyTorch 2.6 that load needs weights_only=False for a
# NumPy array ("Unsupported global: GLOBAL numpy.core.multiarray._reconstruct",
# https://github.com/HorizonRobotics/alf/pull/1754). The pickle
# holds the array's bytes (over 1 MB here); the load must be judged without a check failing on
# a pickle too large to read. A correct script: silent.
import os
import tempfile

import numpy as np
import torch
from torch import nn

torch.manual_seed(0)
np.random.seed(2)
T, L, N = 20, 1500, 100
x = np.empty((N, L), np.int64)
x[:] = np.arange(L) + np.random.randint(-4 * T, 4 * T, N).reshape(N, 1)
waves = np.sin(x / 1.0 / T).astype("float64")
path = os.path.join(tempfile.mkdtemp(), "traindata.pt")
torch.save(waves, path)

data = torch.load(path, weights_only=False)
inputs = torch.from_numpy(data[3:, :-1]).float()[:, :64]
targets = torch.from_numpy(data[3:, 1:]).float()[:, :64]
net = nn.Sequential(nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 64))
optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
for step in range(5):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(net(inputs), targets)
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.4f}")
