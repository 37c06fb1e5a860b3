# Fixed twin of buggy.py (https://github.com/nianticlabs/monodepth2/issues/24): the training step
# runs the network itself; predict() stays for validation under no_grad.
import torch
import torch.nn.functional as F
from torch import nn


class DepthTrainer:
    def __init__(self):
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 1))
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=1e-3)

    @torch.no_grad()
    def predict(self, images):
        return torch.sigmoid(self.net(images))

    def train_step(self, images, depth):
        pred = torch.sigmoid(self.net(images))
        loss = F.l1_loss(pred, depth)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


torch.manual_seed(0)
trainer = DepthTrainer()
images, depth = torch.rand(2, 3, 16, 16), torch.rand(2, 1, 16, 16)
print(trainer.train_step(images, depth))
