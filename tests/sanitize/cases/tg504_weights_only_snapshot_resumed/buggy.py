# Modelled on the GitHub issue "Should you also save the optimizer state?"
# (https://github.com/milesial/Pytorch-UNet/issues/376): the trainer's snapshot holds the two
# networks' weights and a count under its own name, but not the Adam state; the run is stopped,
# the snapshot is loaded back and training goes on with fresh Adam moments.
import os
import tempfile

import torch
from torch import nn


class Trainer:
    def __init__(self):
        self.encoder = nn.Linear(6, 8)
        self.decoder = nn.Linear(8, 6)
        params = [*self.encoder.parameters(), *self.decoder.parameters()]
        self.optimizer = torch.optim.Adam(params, lr=1e-2)
        self.updates = 0

    def step(self, x):
        loss = nn.functional.mse_loss(self.decoder(torch.tanh(self.encoder(x))), x)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.updates += 1

    def snapshot(self, path):
        torch.save({"enc": self.encoder.state_dict(), "dec": self.decoder.state_dict(),
                    "updates": self.updates}, path)  # expect: TG504

    def restore(self, path):
        snap = torch.load(path)
        self.encoder.load_state_dict(snap["enc"])
        self.decoder.load_state_dict(snap["dec"])
        self.updates = snap["updates"]


torch.manual_seed(4)
data = torch.randn(64, 6)
with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "snap.pt")
    first = Trainer()
    for i in range(0, 32, 8):
        first.step(data[i:i + 8])
    first.snapshot(path)
    second = Trainer()
    second.restore(path)
    for i in range(32, 64, 8):
        second.step(data[i:i + 8])
print("updates", second.updates)
