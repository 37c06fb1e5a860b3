# Modelled on https://github.com/facebookresearch/detectron2/issues/2058 ("I wanted to implement
# MultiStepLR(optimizer, milestones=[30,80], gamma=0.1) ... but the model in detectron2 is based on
# iters and not epochs"; answer: "learning rate will be changed at the 30th and 80th iteration"): a
# trainer class with hooks builds a MultiStepLR from a config whose milestones are epochs, and its
# LR hook steps it after every optimizer step. Epochs are 10 batches long, so both milestones pass
# in the first epoch and the rest of the run trains at 1/100 of the rate.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CONFIG = {"epochs": 5, "batch_size": 16, "lr": 0.05, "milestones": [3, 4], "gamma": 0.1}


class LRHook:
    def __init__(self, scheduler):
        self.scheduler = scheduler

    def after_step(self, trainer):
        self.scheduler.step()  # expect: TG305

    def after_epoch(self, trainer):
        pass


class Trainer:
    def __init__(self, model, loader, config):
        self.model, self.loader, self.config = model, loader, config
        self.optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=0.9)
        schedule = torch.optim.lr_scheduler.MultiStepLR(
            self.optimizer, milestones=config["milestones"], gamma=config["gamma"])
        self.hooks = [LRHook(schedule)]

    def run_step(self, signals, labels):
        self.optimizer.zero_grad()
        loss = nn.functional.cross_entropy(self.model(signals), labels)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def train(self):
        for epoch in range(self.config["epochs"]):
            self.model.train()
            for signals, labels in self.loader:
                self.run_step(signals, labels)
                for hook in self.hooks:
                    hook.after_step(self)
            for hook in self.hooks:
                hook.after_epoch(self)
        return self.optimizer.param_groups[0]["lr"]


torch.manual_seed(0)
signals, labels = torch.randn(160, 1, 32), torch.randint(0, 4, (160,))
loader = DataLoader(TensorDataset(signals, labels), batch_size=CONFIG["batch_size"], shuffle=True)
model = nn.Sequential(nn.Conv1d(1, 8, 5), nn.ReLU(), nn.AdaptiveAvgPool1d(1), nn.Flatten(),
                      nn.Linear(8, 4))
print(f"final lr {Trainer(model, loader, CONFIG).train():.3g}")
