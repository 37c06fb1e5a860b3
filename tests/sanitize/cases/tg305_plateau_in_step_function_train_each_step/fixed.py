# The twin of buggy.py: the engine's train_step() still puts the model in training mode at every
# step, but the ReduceLROnPlateau steps once per epoch on the validation loss; a second engine
# steps a plateau per iteration by design, with its patience in iterations (three epochs' steps).
import torch
from torch import nn


class Engine:
    def __init__(self, model, lr, patience):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        self.plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(
            self.optimizer, patience=patience, factor=0.5)

    def train_step(self, features, target, per_iteration):
        self.model.train()
        self.optimizer.zero_grad()
        loss = nn.functional.smooth_l1_loss(self.model(features), target)
        loss.backward()
        self.optimizer.step()
        if per_iteration:
            self.plateau.step(loss.item())
        return loss.item()

    @torch.no_grad()
    def validate(self, features, target):
        self.model.eval()
        return nn.functional.smooth_l1_loss(self.model(features), target).item()


def fit(engine, features, target, per_iteration):
    for epoch in range(4):
        order = torch.randperm(400)
        for start in range(0, 400, 20):
            index = order[start:start + 20]
            engine.train_step(features[index], target[index], per_iteration)
        val_loss = engine.validate(features[400:], target[400:])
        if not per_iteration:
            engine.plateau.step(val_loss)
        print(f"epoch {epoch}: val {val_loss:.3f} "
              f"lr {engine.optimizer.param_groups[0]['lr']:.3g}")


torch.manual_seed(0)
features = torch.randn(480, 10)
target = features[:, :4].sum(1, keepdim=True) + 0.8 * torch.randn(480, 1)
fit(Engine(nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1)), 0.05, 2),
    features, target, per_iteration=False)
fit(Engine(nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1)), 0.05, 3 * 20),
    features, target, per_iteration=True)
