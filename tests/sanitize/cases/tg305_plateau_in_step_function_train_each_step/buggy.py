# Modelled on https://github.com/Lightning-AI/pytorch-lightning/issues/1156 (a ReduceLROnPlateau
# stepped every batch: "you are calling the .step() method for ReduceLROnPlateau after each batch")
# and https://github.com/pytorch/pytorch/pull/7242 (patience is "the number of epochs with no
# improvement"): an engine whose train_step(batch) puts the model in training mode, steps the
# optimizer and then a ReduceLROnPlateau(patience=2) with the mini-batch loss. The loop slices
# batches by hand and validates after each epoch with model.eval(), so train() runs at every step
# and only the return from eval() marks an epoch. Three noisy batches without a new best cut the
# rate, several times per epoch.
import torch
from torch import nn


class Engine:
    def __init__(self, model, lr):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        self.plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(
            self.optimizer, patience=2, factor=0.5)

    def train_step(self, features, target):
        self.model.train()
        self.optimizer.zero_grad()
        loss = nn.functional.smooth_l1_loss(self.model(features), target)
        loss.backward()
        self.optimizer.step()
        self.plateau.step(loss.item())  # expect: TG305
        return loss.item()

    @torch.no_grad()
    def validate(self, features, target):
        self.model.eval()
        return nn.functional.smooth_l1_loss(self.model(features), target).item()


torch.manual_seed(0)
features = torch.randn(480, 10)
target = features[:, :4].sum(1, keepdim=True) + 0.8 * torch.randn(480, 1)
engine = Engine(nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1)), lr=0.05)
for epoch in range(4):
    order = torch.randperm(400)
    for start in range(0, 400, 20):
        index = order[start:start + 20]
        engine.train_step(features[index], target[index])
    val_loss = engine.validate(features[400:], target[400:])
    print(f"epoch {epoch}: val {val_loss:.3f} lr {engine.optimizer.param_groups[0]['lr']:.3g}")
