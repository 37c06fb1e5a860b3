# Fixed twin of buggy.py (https://github.com/m2lines/Samudra/pull/313): the training checkpoint
# holds AdamW's state beside the weights and the epoch; the EMA weights saved alone with the
# epoch are the averaged model for inference, not the trained one, and stay silent.
import os
import tempfile

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn


class EmulatorTrainer:
    def __init__(self, folder):
        self.folder = folder
        self.net = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 6))
        self.ema = AveragedModel(self.net, multi_avg_fn=get_ema_multi_avg_fn(0.9))
        self.opt = torch.optim.AdamW(self.net.parameters(), lr=3e-3)

    def epoch(self, state):
        for _ in range(4):
            target = state.roll(1, dims=1)
            loss = nn.functional.mse_loss(self.net(state), target)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            self.ema.update_parameters(self.net)
        return loss.item()

    def checkpoint(self, epoch):
        torch.save({"epoch": epoch, "ema_weights": self.ema.state_dict()},
                   os.path.join(self.folder, "ema.pt"))
        torch.save({"epoch": epoch, "weights": self.net.state_dict(),
                    "optimizer": self.opt.state_dict()},
                   os.path.join(self.folder, "train.pt"))


torch.manual_seed(3)
trainer = EmulatorTrainer(tempfile.mkdtemp())
ocean = torch.randn(24, 6)
for epoch in range(3):
    trainer.epoch(ocean)
    trainer.checkpoint(epoch)
