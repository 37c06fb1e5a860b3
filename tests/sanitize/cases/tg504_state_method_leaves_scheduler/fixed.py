# Report: https://github.com/PolymathicAI/the_well/pull/63
# Modelled on PolymathicAI/the_well#63 ("resuming a run from a checkpoint incorrectly restarts the
# LR scheduler's warmup and cosine decay"): the trainer saves the model's and the optimizer's
# state but not the lr_scheduler's. Here the checkpoint is the dict a method of the trainer
# returns, saved every few steps while training goes on; the finding is at that dict, where the
# scheduler's state belongs. Fixed twin: the dict holds the scheduler's state too.
import os
import tempfile

import torch
import torch.nn.functional as F
from torch import nn


class Trainer:
    def __init__(self, out_dir: str) -> None:
        self.model = nn.Sequential(nn.Linear(12, 24), nn.GELU(), nn.Linear(24, 1))
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=3e-3)
        self.lr_scheduler = torch.optim.lr_scheduler.OneCycleLR(self.optimizer, max_lr=3e-3,
                                                                total_steps=30)
        self.path = os.path.join(out_dir, "last.pt")
        self.step = 0

    def checkpoint_state(self) -> dict:
        return {"model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "lr_scheduler": self.lr_scheduler.state_dict(),
                "step": self.step}

    def fit(self, steps: int) -> float:
        for _ in range(steps):
            x = torch.randn(16, 12)
            loss = F.mse_loss(self.model(x), x.sum(1, keepdim=True))
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.lr_scheduler.step()
            self.step += 1
            if self.step % 5 == 0:
                torch.save(self.checkpoint_state(), self.path)
        return loss.item()


torch.manual_seed(0)
print(f"loss {Trainer(tempfile.mkdtemp()).fit(12):.4f}")
