# Modelled on mworchel/svbrdf-estimation#31 (https://github.com/mworchel/svbrdf-estimation/issues/31):
# "the weights of the network and the current epoch are saved correctly, [but] we do not store the
# optimizer (and scheduler) state", so a resumed run restarts Adam's moments. The checkpoint dict
# is built over several lines before torch.save; the missing entry belongs in it.
import os
import tempfile

import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(2)


class Trainer:
    def __init__(self, folder):
        self.model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 1))
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.path = os.path.join(folder, "svbrdf.pt")
        self.epoch = 0

    def train_epoch(self, batches):
        self.model.train()
        for image, target in batches:
            self.optimizer.zero_grad()
            loss = F.l1_loss(self.model(image), target)
            loss.backward()
            self.optimizer.step()
        self.epoch += 1
        return loss.item()

    def save(self, loss):
        checkpoint = {
            "epoch": self.epoch,
            "model": self.model.state_dict(),  # expect: TG504
        }
        checkpoint["loss"] = loss
        torch.save(checkpoint, self.path)


batches = [(torch.rand(2, 3, 8, 8), torch.rand(2, 3, 8, 8)) for _ in range(3)]
with tempfile.TemporaryDirectory() as folder:
    trainer = Trainer(folder)
    for _ in range(2):
        trainer.save(trainer.train_epoch(batches))
